//! Checks a plugin file before it is handed to the dynamic loader.
//!
//! `dlopen` maps the file and trusts its headers: a truncated library makes it touch pages
//! past the end of the file (SIGBUS, which kills the process), and opening a FIFO blocks
//! until a writer appears. So before loading, the path must name a regular file whose ELF
//! header is for this machine and whose header tables and loadable segments lie inside
//! the file, and whose dynamic section, thread-local data and read-only-after-relocation
//! part lie at addresses inside the loadable segments (the loader follows those without
//! checking). (The file can still change between this check and the load; this catches
//! mistakes, not an attacker who can rewrite the file meanwhile.)

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// The ELF machine number of the target this crate was built for.
const fn host_machine() -> Option<u16> {
    if cfg!(target_arch = "x86_64") {
        Some(62)
    } else if cfg!(target_arch = "aarch64") {
        Some(183)
    } else if cfg!(target_arch = "powerpc64") {
        Some(21)
    } else if cfg!(target_arch = "riscv64") {
        Some(243)
    } else if cfg!(target_arch = "s390x") {
        Some(22)
    } else {
        None
    }
}

/// Reads `n` bytes at `at` of `data` as a little- or big-endian unsigned number.
fn num(data: &[u8], at: usize, n: usize, little: bool) -> Option<u64> {
    let b = data.get(at..at.checked_add(n)?)?;
    let mut v = 0u64;
    for i in 0..n {
        let byte = if little { b[n - 1 - i] } else { b[i] };
        v = (v << 8) | u64::from(byte);
    }
    Some(v)
}

/// Whether `count` entries of `size` bytes from `offset` lie inside `len` bytes.
fn inside(offset: u64, size: u64, count: u64, len: u64) -> bool {
    size.checked_mul(count)
        .and_then(|n| n.checked_add(offset))
        .is_some_and(|end| end <= len)
}

/// What a file that is not a library seems to be, from its first bytes, for files users
/// pass where a plugin belongs: the artifacts and programs rpjrt reads, a wheel, a script.
fn looks_like(header: &[u8]) -> Option<&'static str> {
    let text = String::from_utf8_lossy(header);
    let text = text.trim_start_matches('\u{feff}').trim_start();
    const MACH_O: [&[u8]; 3] = [
        b"\xcf\xfa\xed\xfe",
        b"\xce\xfa\xed\xfe",
        b"\xca\xfe\xba\xbe",
    ];
    const PROGRAM_TEXT: [&str; 6] = [
        "module",
        "func.func",
        "HloModule",
        "stablehlo.",
        "\"builtin.module\"",
        "#loc",
    ];
    if header.starts_with(b"\x7fELF") {
        Some("it starts like one but is cut short: the copy is incomplete")
    } else if header.starts_with(b"RPJRTEXE") {
        Some("it is an rpjrt artifact, which a client loads (Client.load, `rpjrt run`)")
    } else if header.starts_with(b"ML\xefR") {
        Some("it is MLIR bytecode, a program to compile")
    } else if header.starts_with(b"PK\x03\x04") {
        Some(
            "it is a zip archive; a plugin wheel holds the library: install it, or extract the .so",
        )
    } else if header.starts_with(b"#!") {
        Some("it is a script")
    } else if header.starts_with(b"\x1f\x8b") {
        Some("it is gzip-compressed: decompress it first")
    } else if MACH_O.iter().any(|m| header.starts_with(m)) {
        Some("it is a macOS (Mach-O) library, for another system")
    } else if header.starts_with(b"MZ") {
        Some("it is a Windows (PE) file, for another system")
    } else if ["/* GNU ld script", "GROUP", "INPUT"]
        .iter()
        .any(|p| text.starts_with(p))
    {
        Some("it is a linker script, which names the real library: point at that file")
    } else if PROGRAM_TEXT.iter().any(|p| text.starts_with(p)) {
        Some("it looks like program text, which a client compiles")
    } else {
        None
    }
}

/// Checks that `path` is a regular file holding a shared library for this machine whose
/// headers agree with its size. The error says what is wrong, in words.
pub fn check_library_file(path: &Path) -> Result<(), String> {
    open_library(path).map(drop)
}

/// `path` opened once and checked as [`check_library_file`] says, the open file (at an
/// unspecified position) and its size: what is read after the check comes from the file
/// that was checked, whatever `path` names by then.
fn open_library(path: &Path) -> Result<(File, u64), String> {
    let unreadable = |e: std::io::Error| format!("the file cannot be read ({e})");
    // `metadata` follows symlinks and does not open the file (a FIFO would block): what
    // the path plainly is, said in words.
    let seen = std::fs::metadata(path).map_err(unreadable)?;
    if let Some(kind) = crate::files::kind_of(&seen) {
        return Err(format!("it is {kind}, not a shared library file"));
    }
    // One swapped for a FIFO since is opened without waiting for a writer, and what was
    // opened decides.
    let (mut file, meta) = crate::files::open_for_reading(path).map_err(unreadable)?;
    if let Some(kind) = crate::files::kind_of(&meta) {
        return Err(format!("it is {kind}, not a shared library file"));
    }
    check_opened(&mut file, meta.len())?;
    Ok((file, meta.len()))
}

/// Whether the regular file at `path` is an ELF file built for another kind of machine
/// (another word size, byte order or architecture). The dynamic loader's search passes
/// over such a file and goes on to the next directory, so a search that mirrors it does
/// too. A FIFO or device is not opened for reading (so never waited on).
pub fn built_for_another_machine(path: &Path) -> bool {
    let Ok((file, meta)) = crate::files::open_for_reading(path) else {
        return false;
    };
    if !meta.is_file() {
        return false;
    }
    let mut h = Vec::with_capacity(20);
    if file.take(20).read_to_end(&mut h).is_err() || h.len() < 20 || &h[..4] != b"\x7fELF" {
        return false;
    }
    let is64 = match h[4] {
        1 => false,
        2 => true,
        _ => return false,
    };
    let little = match h[5] {
        1 => true,
        2 => false,
        _ => return false,
    };
    if is64 != cfg!(target_pointer_width = "64") || little != cfg!(target_endian = "little") {
        return true;
    }
    let machine = num(&h, 18, 2, little).unwrap_or(0) as u16;
    host_machine().is_some_and(|host| host != machine)
}

/// Why a file that reports a size of 0 but reads bytes (a `/proc` or `/sys` file) is no
/// plugin library.
pub const SPECIAL_FILE: &str = "it is not a loadable shared library (it is a special file, as \
     /proc and /sys files are: it reports a size of 0, but its contents are made as it is \
     read)";

/// The checks of [`check_library_file`] on the open regular `file` of `len` bytes.
fn check_opened(file: &mut File, len: u64) -> Result<(), String> {
    use std::io::{Seek, SeekFrom};
    let mut header = Vec::with_capacity(64);
    file.seek(SeekFrom::Start(0))
        .and_then(|_| file.by_ref().take(64).read_to_end(&mut header))
        .map_err(|e| format!("the file cannot be read ({e})"))?;
    if header.len() < 16 || &header[..4] != b"\x7fELF" {
        return Err(if len == 0 && header.is_empty() {
            "it is not a loadable shared library (the file is empty)".into()
        } else if len == 0 {
            SPECIAL_FILE.into()
        } else {
            match looks_like(&header) {
                Some(what) => {
                    format!("it is not a loadable shared library (not an ELF file: {what})")
                }
                None => "it is not a loadable shared library (not an ELF file)".into(),
            }
        });
    }
    let is64 = match header[4] {
        2 => true,
        1 => false,
        c => return Err(format!("its ELF header has an unknown class {c}")),
    };
    if is64 != cfg!(target_pointer_width = "64") {
        return Err(format!(
            "it is a {}-bit library, but this process is {}-bit",
            if is64 { 64 } else { 32 },
            usize::BITS
        ));
    }
    let little = match header[5] {
        1 => true,
        2 => false,
        d => return Err(format!("its ELF header has an unknown byte order {d}")),
    };
    if little != cfg!(target_endian = "little") {
        return Err("its byte order differs from this machine's".into());
    }
    let need = if is64 { 64 } else { 52 };
    if header.len() < need {
        return Err(format!(
            "the file is truncated: {len} bytes, shorter than an ELF header"
        ));
    }
    let half = |at| num(&header, at, 2, little).unwrap_or(0);
    let word = |at| num(&header, at, if is64 { 8 } else { 4 }, little).unwrap_or(0);
    let e_type = half(16);
    if e_type != 3 {
        return Err(format!(
            "it is an ELF file of type {e_type}, not a shared library (type 3)"
        ));
    }
    let machine = half(18) as u16;
    if let Some(host) = host_machine() {
        if machine != host {
            return Err(format!(
                "it is built for another architecture (ELF machine {machine}; this machine is \
                 {host})"
            ));
        }
    }
    let (phoff, shoff) = if is64 {
        (word(32), word(40))
    } else {
        (word(28), word(32))
    };
    let at = if is64 { 54 } else { 42 };
    let (phentsize, phnum, shentsize, shnum) = (half(at), half(at + 2), half(at + 4), half(at + 6));
    let truncated = |what: &str| {
        format!("the file is truncated or damaged: its {what} reaches past its end ({len} bytes)")
    };
    // The entry sizes are fixed by the class; anything else is a damaged header (and would
    // make the table read below as large as the header claims).
    let (ph_size, sh_size) = if is64 { (56, 64) } else { (32, 40) };
    if phentsize != ph_size || (shnum > 0 && shentsize != sh_size) {
        return Err(format!(
            "its ELF header is damaged (header table entries of {phentsize} and {shentsize} \
             bytes, expected {ph_size} and {sh_size})"
        ));
    }
    if phnum == 0 || !inside(phoff, phentsize, phnum, len) {
        return Err(truncated("program header table"));
    }
    if shnum > 0 && !inside(shoff, shentsize, shnum, len) {
        return Err(truncated("section header table"));
    }
    // Every loadable segment's file bytes must be in the file: dlopen maps them.
    let mut table = vec![0u8; (phentsize * phnum) as usize];
    file.seek(SeekFrom::Start(phoff))
        .and_then(|_| file.read_exact(&mut table))
        .map_err(|_| truncated("program header table"))?;
    // (p_type, p_offset, p_vaddr, p_filesz, p_memsz) of each program header.
    let field = |e: usize, at64: usize, at32: usize| {
        let (at, n) = if is64 { (at64, 8) } else { (at32, 4) };
        num(&table, e + at, n, little).unwrap_or(u64::MAX)
    };
    let headers: Vec<_> = (0..phnum as usize)
        .map(|i| i * phentsize as usize)
        .map(|e| {
            let p_type = num(&table, e, 4, little).unwrap_or(0);
            let (offset, vaddr) = (field(e, 8, 4), field(e, 16, 8));
            (p_type, offset, vaddr, field(e, 32, 16), field(e, 40, 20))
        })
        .collect();
    for (i, &(p_type, offset, ..)) in headers.iter().enumerate() {
        if p_type == 1 && !inside(offset, headers[i].3, 1, len) {
            return Err(truncated(&format!("loadable segment {i}")));
        }
    }
    check_segment_addresses(&headers)
}

/// The segments the loader reads at their addresses once the file is mapped (the dynamic
/// section, the thread-local data's initial image, the part made read-only after
/// relocation) must lie inside the loadable segments' addresses: the loader follows
/// them without checking (one pointing elsewhere crashes it). `headers` holds
/// `(p_type, p_offset, p_vaddr, p_filesz, p_memsz)` of each program header.
fn check_segment_addresses(headers: &[(u64, u64, u64, u64, u64)]) -> Result<(), String> {
    const PT_GNU_RELRO: u64 = 0x6474_e552;
    let loads = || headers.iter().filter(|h| h.0 == 1);
    let holds = |start: u64, end: Option<u64>| {
        loads().any(|h| h.2 <= start && end.is_some_and(|e| e <= h.2.saturating_add(h.3.max(h.4))))
    };
    // The end of the last loadable segment's last page (the largest page size, 64 KiB):
    // the read-only part after relocation may be padded to a page boundary.
    let mapped_end = loads().map(|h| h.2.saturating_add(h.3.max(h.4))).max();
    let mapped_end = mapped_end.unwrap_or(0);
    let mapped_end = mapped_end.saturating_add(0xffff) & !0xffff;
    for (i, &(p_type, _, vaddr, filesz, memsz)) in headers.iter().enumerate() {
        // A size in memory below the file's is taken as the file's (as for a PT_LOAD).
        let memsz = memsz.max(filesz);
        let (what, ok) = match p_type {
            2 => (
                "dynamic section (PT_DYNAMIC)",
                holds(vaddr, vaddr.checked_add(memsz)),
            ),
            7 => (
                "thread-local data (PT_TLS)",
                holds(vaddr, vaddr.checked_add(filesz)),
            ),
            PT_GNU_RELRO => (
                "read-only-after-relocation part (PT_GNU_RELRO)",
                holds(vaddr, vaddr.checked_add(1))
                    && vaddr.checked_add(memsz).is_some_and(|e| e <= mapped_end),
            ),
            _ => continue,
        };
        if !ok {
            return Err(format!(
                "the file is damaged: its {what}, program header {i}, lies at addresses \
                 {vaddr:#x}..+{:#x}, outside every loadable segment",
                if p_type == 7 { filesz } else { memsz }
            ));
        }
    }
    Ok(())
}

/// What a shared library asks of the dynamic loader: the libraries it needs (`DT_NEEDED`,
/// in order) and where it asks for them to be searched (`DT_RUNPATH`, `DT_RPATH`, each
/// `:`-separated, `$ORIGIN` not yet expanded).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dynamic {
    /// The `DT_NEEDED` entries, in order.
    pub needed: Vec<String>,
    /// The `DT_RUNPATH` entry.
    pub runpath: Option<String>,
    /// The `DT_RPATH` entry.
    pub rpath: Option<String>,
    /// The `DT_SONAME` entry.
    pub soname: Option<String>,
    /// The whole dynamic string table (NUL-separated: the names above and the dynamic
    /// symbols' names among them).
    pub strings: Vec<u8>,
}

/// A shared library's file opened for reading its dynamic section: the ELF header's
/// class and byte order, and its program headers.
struct DynReader {
    file: File,
    len: u64,
    is64: bool,
    little: bool,
    /// (p_type, p_offset, p_vaddr, p_filesz) of each program header.
    headers: Vec<(u64, u64, u64, u64)>,
    /// What a read outside the file is said to be (`"its dynamic section"`).
    what: &'static str,
}

impl DynReader {
    /// Opens the library at `path` (which [`check_library_file`] accepted) and reads its
    /// ELF header and program headers.
    fn open(path: &Path, what: &'static str) -> Result<Self, String> {
        let (file, len) = open_library(path)?;
        let mut r = DynReader {
            file,
            len,
            is64: false,
            little: true,
            headers: Vec::new(),
            what,
        };
        let header = r.read_at(0, 64.min(len))?;
        r.is64 = header[4] == 2;
        r.little = header[5] == 1;
        let phoff = r.word(&header, if r.is64 { 32 } else { 28 });
        let at = if r.is64 { 54 } else { 42 };
        let (phentsize, phnum) = (r.half(&header, at), r.half(&header, at + 2));
        let table = r.read_at(phoff, phentsize * phnum)?;
        r.headers = (0..phnum as usize)
            .map(|i| {
                let e = i * phentsize as usize;
                let t = r.u32_at(&table, e);
                let fields = if r.is64 { [8, 16, 32] } else { [4, 8, 16] };
                let [off, vaddr, size] = fields.map(|f| r.word(&table, e + f));
                (t, off, vaddr, size)
            })
            .collect();
        Ok(r)
    }

    /// `n` bytes of the file from `at`.
    fn read_at(&mut self, at: u64, n: u64) -> Result<Vec<u8>, String> {
        use std::io::{Seek, SeekFrom};
        if !inside(at, n, 1, self.len) || n > (64 << 20) {
            return Err(format!("{} lies outside the file", self.what));
        }
        let mut buf = vec![0u8; n as usize];
        self.file
            .seek(SeekFrom::Start(at))
            .and_then(|_| self.file.read_exact(&mut buf))
            .map_err(|e| format!("the file cannot be read ({e})"))?;
        Ok(buf)
    }

    /// The address-sized word at `at` of `d` (0 past its end).
    fn word(&self, d: &[u8], at: usize) -> u64 {
        num(d, at, if self.is64 { 8 } else { 4 }, self.little).unwrap_or(0)
    }

    /// The 16-bit number at `at` of `d`.
    fn half(&self, d: &[u8], at: usize) -> u64 {
        num(d, at, 2, self.little).unwrap_or(0)
    }

    /// The 32-bit number at `at` of `d`.
    fn u32_at(&self, d: &[u8], at: usize) -> u64 {
        num(d, at, 4, self.little).unwrap_or(0)
    }

    /// The (tag, value) entries of the dynamic segment, up to `DT_NULL`; `None` when the
    /// library has no `PT_DYNAMIC`.
    fn dynamic_entries(&mut self) -> Result<Option<Vec<(u64, u64)>>, String> {
        let Some(&(_, off, _, size)) = self.headers.iter().find(|h| h.0 == 2) else {
            return Ok(None);
        };
        let entries = self.read_at(off, size)?;
        let w = if self.is64 { 8 } else { 4 };
        Ok(Some(
            entries
                .chunks_exact(2 * w)
                .map(|e| (self.word(e, 0), self.word(e, w)))
                .take_while(|&(tag, _)| tag != 0)
                .collect(),
        ))
    }

    /// A dynamic address as a file offset, through the loadable segment holding it.
    fn file_offset(&self, addr: u64) -> Option<u64> {
        self.headers
            .iter()
            .find(|h| h.0 == 1 && h.2 <= addr && addr < h.2.saturating_add(h.3))
            .map(|h| addr - h.2 + h.1)
    }
}

/// Reads the dynamic section of the shared library at `path` (which
/// [`check_library_file`] accepted). Only the ELF header, the program headers, the dynamic
/// segment and its string table are read, however large the file.
pub fn dynamic_info(path: &Path) -> Result<Dynamic, String> {
    let mut r = DynReader::open(path, "its dynamic section")?;
    let Some(entries) = r.dynamic_entries()? else {
        return Ok(Dynamic::default()); // PT_DYNAMIC absent: a static library needs nothing
    };
    let (mut needed, mut runpath, mut rpath, mut soname) = (Vec::new(), None, None, None);
    let (mut strtab, mut strsz) = (None, 0u64);
    for (tag, val) in entries {
        match tag {
            1 => needed.push(val),
            5 => strtab = Some(val),
            10 => strsz = val,
            14 => soname = Some(val),
            15 => rpath = Some(val),
            29 => runpath = Some(val),
            _ => {}
        }
    }
    let Some(strtab) = strtab else {
        return Err("its dynamic section has no string table".into());
    };
    // DT_STRTAB is an address: find the loadable segment that holds it.
    let Some(at) = r.file_offset(strtab) else {
        return Err("its string table lies outside its loadable segments".into());
    };
    let strings = r.read_at(at, strsz)?;
    let text = |at: u64| -> Result<String, String> {
        let s = strings
            .get(at as usize..)
            .and_then(|s| s.split(|&b| b == 0).next())
            .ok_or("a dynamic entry points outside its string table")?;
        Ok(String::from_utf8_lossy(s).into_owned())
    };
    let needed = needed.into_iter().map(text).collect::<Result<_, _>>()?;
    let runpath = runpath.map(text).transpose()?;
    let rpath = rpath.map(text).transpose()?;
    let soname = soname.map(text).transpose()?;
    Ok(Dynamic {
        needed,
        runpath,
        rpath,
        soname,
        strings,
    })
}

/// What kind of symbol a library defines under a name, from its dynamic symbol table's
/// `STT_*` type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymbolKind {
    /// Code: `STT_FUNC`, `STT_GNU_IFUNC` (a resolver the loader calls), or `STT_NOTYPE`
    /// (hand-written assembly often leaves functions untyped).
    Code,
    /// Something that cannot be called; the words for it (`"a data object"`).
    NotCode(&'static str),
}

/// The kind of the symbol `name` that the shared library at `path` defines in its dynamic
/// symbol table (what `dlsym` finds first), as the loader sees it (through `DT_SYMTAB`,
/// sized by `DT_HASH` or `DT_GNU_HASH`): `Ok(None)` when it defines no such symbol (it
/// may come from a library it needs) or the table cannot be sized.
pub fn defined_symbol(path: &Path, name: &str) -> Result<Option<SymbolKind>, String> {
    let mut r = DynReader::open(path, "its dynamic symbol table")?;
    let Some(entries) = r.dynamic_entries()? else {
        return Ok(None);
    };
    let (mut symtab, mut strtab, mut strsz, mut hash, mut gnu_hash) = (None, None, 0, None, None);
    for e in entries {
        match e {
            (4, v) => hash = Some(v),
            (5, v) => strtab = Some(v),
            (6, v) => symtab = Some(v),
            (10, v) => strsz = v,
            (0x6fff_fef5, v) => gnu_hash = Some(v),
            _ => {}
        }
    }
    let (Some(symtab), Some(strtab)) = (
        symtab.and_then(|a| r.file_offset(a)),
        strtab.and_then(|a| r.file_offset(a)),
    ) else {
        return Ok(None);
    };
    let (is64, len) = (r.is64, r.len);
    let w = if is64 { 8 } else { 4 };
    let syment = if is64 { 24u64 } else { 16 };
    // The number of symbols: DT_HASH's chain count, or past the last chain DT_GNU_HASH has.
    let count = if let Some(h) = hash.and_then(|a| r.file_offset(a)) {
        let head = r.read_at(h, 8)?;
        r.u32_at(&head, 4)
    } else if let Some(h) = gnu_hash.and_then(|a| r.file_offset(a)) {
        let head = r.read_at(h, 16)?;
        let (nbuckets, symoffset, bloom) =
            (r.u32_at(&head, 0), r.u32_at(&head, 4), r.u32_at(&head, 8));
        let buckets_at = h + 16 + bloom * w as u64;
        let buckets = r.read_at(buckets_at, nbuckets * 4)?;
        let last = (0..nbuckets as usize)
            .map(|i| r.u32_at(&buckets, 4 * i))
            .max()
            .unwrap_or(0);
        if last < symoffset {
            symoffset
        } else {
            // The last bucket's chain ends at the first entry whose low bit is set: read
            // it a page at a time, for at most 2^20 entries.
            let chain_at = buckets_at + nbuckets * 4 + 4 * (last - symoffset);
            let mut end = None;
            for page in 0..256u64 {
                let at = chain_at + page * 4096;
                let chunk = r.read_at(at, 4096.min(len.saturating_sub(at)))?;
                if let Some(k) = (0..chunk.len() / 4).find(|&k| r.u32_at(&chunk, 4 * k) & 1 == 1) {
                    end = Some(last + page * 1024 + k as u64 + 1);
                    break;
                }
                if chunk.len() < 4096 {
                    break;
                }
            }
            let Some(end) = end else { return Ok(None) };
            end
        }
    } else {
        return Ok(None);
    };
    let symbols = r.read_at(symtab, count.min(16 << 20) * syment)?;
    let strings = r.read_at(strtab, strsz)?;
    for s in symbols.chunks_exact(syment as usize) {
        let (st_name, info, shndx) = if is64 {
            (r.u32_at(s, 0), s[4], r.half(s, 6))
        } else {
            (r.u32_at(s, 0), s[12], r.half(s, 14))
        };
        let named = strings
            .get(st_name as usize..)
            .and_then(|t| t.split(|&b| b == 0).next());
        if shndx == 0 || named != Some(name.as_bytes()) {
            continue; // undefined here (imported), or another name
        }
        return Ok(Some(match info & 0xf {
            0 | 2 | 10 => SymbolKind::Code,
            1 => SymbolKind::NotCode("a data object"),
            3 => SymbolKind::NotCode("a section"),
            4 => SymbolKind::NotCode("a file name"),
            5 => SymbolKind::NotCode("a common data block"),
            6 => SymbolKind::NotCode("a thread-local variable"),
            _ => SymbolKind::NotCode("a symbol of an unknown, non-function type"),
        }));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A /proc file reports a size of 0 yet reads bytes: it is called a special file, not
    /// an empty one; a truly empty file is empty.
    #[test]
    fn special_files_are_not_called_empty() {
        let e = check_library_file(Path::new("/proc/self/status")).unwrap_err();
        assert_eq!(e, SPECIAL_FILE);
        let empty = std::env::temp_dir().join(format!("rpjrt-elf-empty-{}", std::process::id()));
        std::fs::write(&empty, b"").unwrap();
        let e = check_library_file(&empty).unwrap_err();
        std::fs::remove_file(&empty).unwrap();
        assert!(e.contains("the file is empty"), "{e}");
    }

    fn own_library() -> Option<std::path::PathBuf> {
        // Any shared library of this machine will do: the C library is always there.
        [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib/aarch64-linux-gnu/libc.so.6",
            "/lib64/libc.so.6",
        ]
        .iter()
        .map(std::path::PathBuf::from)
        .find(|p| p.is_file())
    }

    #[test]
    fn the_c_library_needs_the_loader() {
        let Some(lib) = own_library() else { return };
        let d = dynamic_info(&lib).unwrap();
        assert!(d.needed.iter().any(|n| n.starts_with("ld-linux")), "{d:?}");
    }

    /// A copy whose PT_DYNAMIC, PT_TLS or PT_GNU_RELRO address lies outside every
    /// loadable segment is refused, naming the segment, before the loader follows it.
    #[test]
    fn segments_outside_the_loadable_ones_are_refused() {
        let Some(lib) = own_library() else { return };
        let bytes = std::fs::read(&lib).unwrap();
        assert_eq!(&bytes[4..6], b"\x02\x01", "a 64-bit little-endian library");
        let at = |o: usize, n: usize| num(&bytes, o, n, true).unwrap() as usize;
        let (phoff, phnum) = (at(32, 8), at(56, 2));
        let dir = std::env::temp_dir().join(format!("rpjrt-elf-seg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut seen = 0;
        for (p_type, says) in [
            (2u32, "PT_DYNAMIC"),
            (7, "PT_TLS"),
            (0x6474_e552, "PT_GNU_RELRO"),
        ] {
            let Some(i) = (0..phnum).find(|i| at(phoff + 56 * i, 4) == p_type as usize) else {
                continue;
            };
            seen += 1;
            let mut b = bytes.clone();
            b[phoff + 56 * i + 16..][..8].copy_from_slice(&(1u64 << 40).to_le_bytes());
            let p = dir.join(format!("seg{p_type}.so"));
            std::fs::write(&p, &b).unwrap();
            let e = check_library_file(&p).unwrap_err();
            assert!(
                e.contains(says) && e.contains(&format!("header {i}")),
                "{e}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(seen >= 2, "the C library has PT_DYNAMIC and PT_GNU_RELRO");
    }

    #[test]
    fn non_regular_files_are_refused_without_opening() {
        assert!(check_library_file(Path::new("/"))
            .unwrap_err()
            .contains("directory"));
        assert!(check_library_file(Path::new("/dev/zero"))
            .unwrap_err()
            .contains("character device"));
        assert!(check_library_file(Path::new("/nonexistent/x.so"))
            .unwrap_err()
            .contains("cannot be read"));
    }

    #[test]
    fn truncated_copies_are_refused() {
        let Some(lib) = own_library() else { return };
        assert_eq!(check_library_file(&lib), Ok(()));
        let bytes = std::fs::read(&lib).unwrap();
        let dir = std::env::temp_dir().join(format!("rpjrt-elf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for cut in [0, 3, 40, 64, 4096, bytes.len() / 2, bytes.len() - 1] {
            let p = dir.join(format!("cut{cut}.so"));
            std::fs::write(&p, &bytes[..cut]).unwrap();
            assert!(
                check_library_file(&p).is_err(),
                "a copy cut at {cut} was accepted"
            );
        }
        let text = dir.join("text.so");
        std::fs::write(&text, b"not a library at all").unwrap();
        assert!(check_library_file(&text)
            .unwrap_err()
            .contains("not an ELF file"));
        for (bytes, says) in [
            (&b"RPJRTEXE\x01\x00"[..], "rpjrt artifact"),
            (b"ML\xefR\x00MLIR", "MLIR bytecode"),
            (b"PK\x03\x04\x14\x00", "zip archive"),
            (b"  func.func @main() {}", "program text"),
            (
                "\u{feff}#loc = loc(unknown)\nmodule {}".as_bytes(),
                "program text",
            ),
            (
                b"/* GNU ld script\n */\nGROUP ( /lib/libc.so.6 )",
                "linker script",
            ),
            (b"\x1f\x8b\x08\x00", "gzip"),
            (b"\xcf\xfa\xed\xfe\x07\x00", "Mach-O"),
            (b"\x7fELF", "cut short"),
        ] {
            std::fs::write(&text, bytes).unwrap();
            let e = check_library_file(&text).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
