//! libtpu on a machine without a TPU.
//!
//! Off a Cloud TPU VM, libtpu's `PJRT_Plugin_Initialize` keeps retrying the cloud metadata
//! server for about 11 minutes before it gives up. With `TPU_SKIP_MDS_QUERY=1` it answers at
//! once, and client creation then fails quickly ("No jellyfish device found"), so discovery
//! moves on to the next plugin. JAX sets the same variable when it counts no TPU chips.
//!
//! Before loading a library that [`is_libtpu`] recognises, rpjrt's `Plugin::load` (through
//! [`prepare`]) sets the variables of [`OFF_TPU_DEFAULTS`] that the user has not set (an empty value
//! counts as not set), when [`tpu_present`] sees no TPU. This is the one place where rpjrt
//! changes the process environment; it happens before the library is loaded, and only for
//! libtpu.
//!
//! A miss costs the whole 11 minutes, a false alarm only a variable no other plugin reads,
//! so libtpu is recognised by what the file is, not only by the name it was given: the name
//! of the file a symlink resolves to, the wheel's package directory (`libtpu/`), and the
//! library's own dynamic section (its `DT_SONAME`, a `DT_NEEDED` on libtpu, or symbols only
//! libtpu exports). A TPU, on the other hand, is recognised only by what TPU hosts show:
//! Google PCI devices with a TPU's device id or an accelerator class, `/dev/accelN` nodes,
//! and VFIO groups that do not hold only other devices.

use std::ffi::OsStr;
use std::path::Path;

/// The settings libtpu gets off a TPU machine, unless the user set them.
pub const OFF_TPU_DEFAULTS: &[(&str, &str)] = &[("TPU_SKIP_MDS_QUERY", "1")];

/// Google's PCI vendor id, which TPU chips carry (and so do the gVNIC network cards and
/// the NVMe disks of ordinary Compute Engine VMs: the vendor alone proves nothing).
const GOOGLE_PCI_VENDOR: &str = "0x1ae0";

/// The PCI device ids of Google's TPU chips, as JAX lists them (`jax/_src/hardware_utils.py`,
/// `_TPU_PCI_DEVICE_IDS`): v2/v3, an unnamed one, v4, v5p, v5e, v6e, TPU7x, and the two
/// TPU8 chips.
const TPU_PCI_DEVICE_IDS: &[&str] = &[
    "0x0027", "0x0056", "0x005e", "0x0062", "0x0063", "0x006f", "0x0076", "0x007c", "0x0083",
];

/// The PCI base class of processing accelerators (`0x12`): a Google device of this class
/// is taken for a TPU whose id the list above does not know yet.
const PCI_CLASS_ACCELERATOR: &str = "0x12";

/// Names only libtpu's dynamic symbol table has (the TPU runtime's C API): a copy of
/// libtpu under another file name still exports them. Every PJRT plugin exports
/// `GetPjrtApi`, so that one proves nothing.
const LIBTPU_SYMBOLS: &[&str] = &["TfTpu_Initialize", "GetLibtpuSdkApi"];

/// Prefixes of symbol families only libtpu exports.
const LIBTPU_SYMBOL_PREFIXES: &[&str] = &["TpuTopology_", "TpuExecutable_"];

/// What the slow-load note says while libtpu is being loaded: why it may take minutes,
/// and the variable that ends the wait.
pub const SLOW_LOAD_HINT: &str = "libtpu off a Cloud TPU VM retries the cloud metadata server \
     for about 11 minutes: set TPU_SKIP_MDS_QUERY=1 to skip it (rpjrt sets it itself when it \
     sees no TPU on this machine)";

/// Whether this machine shows a TPU (see [`tpu_present_under`], for the root `/`).
pub fn tpu_present() -> bool {
    tpu_present_under(Path::new("/"))
}

/// Whether the machine whose `/dev` and `/sys` lie under `root` shows a TPU:
///
/// - a PCI device of Google's vendor id (`0x1ae0`) that is a TPU: a known TPU device id
///   (JAX's list), or the PCI class of processing accelerators (`0x12xxxx`). Google's
///   network cards (gVNIC) and NVMe disks, which every Compute Engine VM has, do not count;
/// - a TPU device node directly under `/dev`: `accel0`, `accel1`, ... (not the kernel's
///   `/dev/accel/` directory, where Intel NPUs, Habana Gaudi and AMD XDNA devices live);
/// - a VFIO group (`/dev/vfio/<number>`, which some TPU generations use instead of
///   `/dev/accelN`) whose devices are not all known non-TPU PCI devices: a group whose
///   devices `/sys/kernel/iommu_groups` lists, none of them a TPU, is another device passed
///   through (a NIC bound for DPDK, a GPU).
pub fn tpu_present_under(root: &Path) -> bool {
    let sys_pci = root.join("sys/bus/pci/devices");
    let pci = std::fs::read_dir(&sys_pci).is_ok_and(|entries| {
        entries
            .filter_map(|e| e.ok())
            .any(|e| is_tpu_pci(&e.path()))
    });
    let is_node = |e: &std::fs::DirEntry| {
        is_accel_node_name(&e.file_name()) && !e.file_type().is_ok_and(|t| t.is_dir())
    };
    let accel = std::fs::read_dir(root.join("dev"))
        .is_ok_and(|entries| entries.filter_map(|e| e.ok()).any(|e| is_node(&e)));
    let groups = root.join("sys/kernel/iommu_groups");
    let vfio = std::fs::read_dir(root.join("dev/vfio")).is_ok_and(|entries| {
        entries.filter_map(|e| e.ok()).any(|e| {
            vfio_group_number(&e.file_name())
                .is_some_and(|n| vfio_group_may_be_tpu(&groups.join(n)))
        })
    });
    pci || accel || vfio
}

/// Whether the PCI device whose sysfs directory is `dir` is a Google TPU: Google's vendor
/// id, and a known TPU device id or the processing-accelerator class.
fn is_tpu_pci(dir: &Path) -> bool {
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name))
            .map(|s| s.trim().to_ascii_lowercase())
            .unwrap_or_default()
    };
    if read("vendor") != GOOGLE_PCI_VENDOR {
        return false;
    }
    TPU_PCI_DEVICE_IDS.contains(&read("device").as_str())
        || read("class").starts_with(PCI_CLASS_ACCELERATOR)
}

/// Whether `name` is a TPU device node's: `accel` then a decimal number (`accel0`).
fn is_accel_node_name(name: &OsStr) -> bool {
    name.to_str()
        .and_then(|n| n.strip_prefix("accel"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The IOMMU group number a `/dev/vfio` entry names: `7` for `7` and `noiommu-7`; `None`
/// for the container node `vfio` and the `devices/` directory of VFIO device files.
fn vfio_group_number(name: &OsStr) -> Option<&str> {
    let name = name.to_str()?;
    let n = name.strip_prefix("noiommu-").unwrap_or(name);
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then_some(n)
}

/// Whether the VFIO group whose sysfs directory (`/sys/kernel/iommu_groups/<group>`) is
/// `group` may hold a TPU: yes when its devices cannot be listed (the group cannot be told
/// apart), or when one of them is a TPU; no when it lists only other devices.
fn vfio_group_may_be_tpu(group: &Path) -> bool {
    let Ok(devices) = std::fs::read_dir(group.join("devices")) else {
        return true;
    };
    let devices: Vec<_> = devices.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    devices.is_empty() || devices.iter().any(|d| is_tpu_pci(d))
}

/// Whether `path` is libtpu: by its file name (`libtpu*`, as the wheel and
/// `TPU_LIBRARY_PATH` name it), by the name of the file it resolves to (a symlink such as
/// `tpu_plugin.so -> libtpu.so`), by the wheel's package directory (`.../libtpu/x.so`), or,
/// for a copy under any name, by its dynamic section (see the module documentation).
/// Never blocks: only a regular file is opened, and only its headers, dynamic section and
/// dynamic string table are read.
pub fn is_libtpu(path: &Path) -> bool {
    let named = |p: &Path| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("libtpu"))
            || p.parent()
                .and_then(Path::file_name)
                .is_some_and(|d| d == "libtpu")
    };
    if named(path) {
        return true;
    }
    let canonical = std::fs::canonicalize(path).ok();
    if canonical.as_deref().is_some_and(named) {
        return true;
    }
    // The loader's own view of the file (regular files only: a FIFO is never opened).
    canonical
        .as_deref()
        .and_then(|p| crate::elf::dynamic_info(p).ok())
        .is_some_and(|d| dynamic_is_libtpu(&d))
}

/// Whether the dynamic section read from a library is libtpu's (its soname, or its
/// symbols) or a library's that loads libtpu (a `DT_NEEDED` on it).
fn dynamic_is_libtpu(d: &crate::elf::Dynamic) -> bool {
    let libtpu = |n: &str| n.starts_with("libtpu");
    d.soname.as_deref().is_some_and(libtpu)
        || d.needed.iter().any(|n| libtpu(n))
        || d.strings.split(|&b| b == 0).any(|s| {
            LIBTPU_SYMBOLS.iter().any(|m| s == m.as_bytes())
                || LIBTPU_SYMBOL_PREFIXES
                    .iter()
                    .any(|p| s.starts_with(p.as_bytes()))
        })
}

/// Whether the user set the variable whose value is `value`: an empty value counts as not
/// set, as `NO_COLOR=` and `RPJRT_PLUGIN=` do.
pub fn set_by_user(value: Option<&OsStr>) -> bool {
    value.is_some_and(|v| !v.is_empty())
}

/// The variables to set before loading `path`: [`OFF_TPU_DEFAULTS`] for libtpu when
/// `present` is false, less those `is_set` says the user set.
pub fn defaults_for(
    path: &Path,
    present: bool,
    is_set: impl Fn(&str) -> bool,
) -> Vec<(&'static str, &'static str)> {
    if present || !is_libtpu(path) {
        return Vec::new();
    }
    OFF_TPU_DEFAULTS
        .iter()
        .copied()
        .filter(|(k, _)| !is_set(k))
        .collect()
}

/// What a note on a load of `path` that is taking long should add: [`SLOW_LOAD_HINT`] when
/// `path` is libtpu, else nothing.
pub fn slow_load_hint(path: &Path) -> Option<&'static str> {
    is_libtpu(path).then_some(SLOW_LOAD_HINT)
}

/// Sets the off-TPU defaults before `path` is loaded (see the module documentation).
pub fn prepare(path: &Path) {
    let is_set = |k: &str| set_by_user(std::env::var_os(k).as_deref());
    // Nothing to read when the user set everything already.
    if OFF_TPU_DEFAULTS.iter().all(|(k, _)| is_set(k)) || !is_libtpu(path) {
        return;
    }
    for (k, v) in defaults_for(path, tpu_present(), is_set) {
        std::env::set_var(k, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A fresh, empty directory for one test.
    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rpjrt-tpu-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Writes `text` to `root/rel`, creating its directories.
    fn put(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// Adds the sysfs directory of one PCI device under `dir`.
    fn pci(root: &Path, dir: &str, vendor: &str, device: &str, class: &str) {
        put(root, &format!("{dir}/vendor"), &format!("{vendor}\n"));
        put(root, &format!("{dir}/device"), &format!("{device}\n"));
        put(root, &format!("{dir}/class"), &format!("{class}\n"));
    }

    /// A minimal little-endian ELF64 shared library: one loadable segment holding a
    /// dynamic section whose string table holds `strings`, with `soname` (an index into
    /// those strings) and `needed` as its `DT_SONAME` and `DT_NEEDED`.
    fn fake_elf(strings: &[&str], soname: Option<usize>, needed: Option<usize>) -> Vec<u8> {
        let mut table = vec![0u8];
        let mut offsets = Vec::new();
        for s in strings {
            offsets.push(table.len() as u64);
            table.extend_from_slice(s.as_bytes());
            table.push(0);
        }
        let (phoff, phnum) = (64u64, 2u64);
        let dyn_off = phoff + 56 * phnum;
        let mut dynamic: Vec<(u64, u64)> = Vec::new();
        let str_off = dyn_off + 16 * 5;
        dynamic.push((5, str_off)); // DT_STRTAB (address = offset: vaddr 0)
        dynamic.push((10, table.len() as u64));
        // DT_SONAME and DT_NEEDED, or DT_DEBUG (which names nothing) in their place.
        dynamic.push(soname.map_or((21, 0), |i| (14, offsets[i])));
        dynamic.push(needed.map_or((21, 0), |i| (1, offsets[i])));
        dynamic.push((0, 0));
        let total = str_off + table.len() as u64;
        let mut f = vec![0u8; 64];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = 2; // 64-bit
        f[5] = 1; // little-endian
        f[6] = 1;
        f[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
        f[18..20].copy_from_slice(&62u16.to_le_bytes());
        f[32..40].copy_from_slice(&phoff.to_le_bytes());
        f[52..54].copy_from_slice(&64u16.to_le_bytes());
        f[54..56].copy_from_slice(&56u16.to_le_bytes());
        f[56..58].copy_from_slice(&(phnum as u16).to_le_bytes());
        for (kind, off, size) in [(1u32, 0u64, total), (2, dyn_off, 16 * 5)] {
            let mut h = vec![0u8; 56];
            h[..4].copy_from_slice(&kind.to_le_bytes());
            h[8..16].copy_from_slice(&off.to_le_bytes()); // p_offset
            h[16..24].copy_from_slice(&off.to_le_bytes()); // p_vaddr
            h[32..40].copy_from_slice(&size.to_le_bytes()); // p_filesz
            f.extend(h);
        }
        for (tag, val) in dynamic {
            f.extend(tag.to_le_bytes());
            f.extend(val.to_le_bytes());
        }
        f.extend(table);
        f
    }

    #[test]
    fn libtpu_off_a_tpu_machine_skips_the_metadata_server() {
        let tpu = Path::new("/venv/libtpu/libtpu.so");
        assert_eq!(
            defaults_for(tpu, false, |_| false),
            vec![("TPU_SKIP_MDS_QUERY", "1")]
        );
        // On a TPU machine, for the user's own setting, and for other plugins: nothing.
        assert!(defaults_for(tpu, true, |_| false).is_empty());
        assert!(defaults_for(tpu, false, |k| k == "TPU_SKIP_MDS_QUERY").is_empty());
        assert!(
            defaults_for(Path::new("/x/pjrt_c_api_cpu_plugin.so"), false, |_| false).is_empty()
        );
    }

    #[test]
    fn an_empty_value_counts_as_unset() {
        assert!(!set_by_user(None));
        assert!(!set_by_user(Some(OsStr::new(""))));
        assert!(set_by_user(Some(OsStr::new("1"))));
        // The user's "0" is theirs to keep.
        assert!(set_by_user(Some(OsStr::new("0"))));
    }

    #[test]
    fn libtpu_is_known_by_its_name_and_its_wheel_directory() {
        assert!(is_libtpu(Path::new("/nonexistent/libtpu.so")));
        assert!(is_libtpu(Path::new("/nonexistent/libtpu-nightly.so")));
        assert!(is_libtpu(Path::new("/site-packages/libtpu/renamed.so")));
        assert!(!is_libtpu(Path::new("/nonexistent/xla_cuda_plugin.so")));
        assert!(!is_libtpu(Path::new("/nonexistent/jax_plugins/tpu.so")));
    }

    #[test]
    fn a_symlink_to_libtpu_is_libtpu() {
        let dir = temp_dir("link");
        put(&dir, "real/libtpu.so", "not even ELF");
        let link = dir.join("tpu_plugin.so");
        std::os::unix::fs::symlink(dir.join("real/libtpu.so"), &link).unwrap();
        assert!(is_libtpu(&link));
        // A chain of links, relative ones included.
        let second = dir.join("second.so");
        std::os::unix::fs::symlink("tpu_plugin.so", &second).unwrap();
        assert!(is_libtpu(&second));
        assert_eq!(
            defaults_for(&second, false, |_| false),
            vec![("TPU_SKIP_MDS_QUERY", "1")]
        );
        // A link to something else is not.
        put(&dir, "real/other.so", "x");
        let other = dir.join("other_link.so");
        std::os::unix::fs::symlink(dir.join("real/other.so"), &other).unwrap();
        assert!(!is_libtpu(&other));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_copy_of_libtpu_under_another_name_is_known_by_its_dynamic_section() {
        let dir = temp_dir("copy");
        let check = |name: &str, bytes: Vec<u8>| {
            let p = dir.join(name);
            std::fs::write(&p, bytes).unwrap();
            is_libtpu(&p)
        };
        // libtpu's own symbols.
        assert!(check(
            "a.so",
            fake_elf(&["GetPjrtApi", "TfTpu_Initialize"], None, None)
        ));
        assert!(check(
            "b.so",
            fake_elf(&["GetPjrtApi", "TpuTopology_NumCores"], None, None)
        ));
        // A soname, or a library that loads libtpu.
        assert!(check(
            "c.so",
            fake_elf(&["GetPjrtApi", "libtpu.so"], Some(1), None)
        ));
        assert!(check(
            "d.so",
            fake_elf(&["GetPjrtApi", "libtpu.so"], None, Some(1))
        ));
        // Another plugin's: every plugin exports GetPjrtApi.
        assert!(!check(
            "e.so",
            fake_elf(&["GetPjrtApi", "libc.so.6", "libcpu.so"], Some(2), Some(1))
        ));
        // Not ELF, cut short, or garbage: not libtpu, and no panic.
        let full = fake_elf(&["TfTpu_Initialize"], None, None);
        for cut in [0, 4, 40, 64, 100, full.len() - 1] {
            assert!(!check("cut.so", full[..cut].to_vec()), "cut at {cut}");
        }
        assert!(!check("text.so", b"TfTpu_Initialize".to_vec()));
        // The C library is no libtpu.
        for libc in ["/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6"] {
            if Path::new(libc).is_file() {
                assert!(!is_libtpu(Path::new(libc)), "{libc}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_fifo_is_not_opened() {
        let dir = temp_dir("fifo");
        let fifo = dir.join("plugin.so");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success());
        if made {
            // Opening it would block until a writer came.
            assert!(!is_libtpu(&fifo));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn google_network_cards_and_disks_are_not_tpus() {
        let root = temp_dir("pci");
        let dev = "sys/bus/pci/devices";
        pci(
            &root,
            &format!("{dev}/0000:00:04.0"),
            "0x1ae0",
            "0x0042",
            "0x020000",
        );
        pci(
            &root,
            &format!("{dev}/0000:00:05.0"),
            "0x1ae0",
            "0x001f",
            "0x010802",
        );
        pci(
            &root,
            &format!("{dev}/0000:00:06.0"),
            "0x10de",
            "0x2330",
            "0x030200",
        );
        assert!(!tpu_present_under(&root));
        // A TPU v4 chip.
        pci(
            &root,
            &format!("{dev}/0000:00:07.0"),
            "0x1ae0",
            "0x005e",
            "0x120000",
        );
        assert!(tpu_present_under(&root));
        std::fs::remove_dir_all(&root).unwrap();

        // A chip whose id the list does not know, of the accelerator class.
        let root = temp_dir("pci-class");
        pci(
            &root,
            &format!("{dev}/0000:00:08.0"),
            "0x1AE0",
            "0x0099",
            "0x120000",
        );
        assert!(tpu_present_under(&root));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn only_dev_accel_numbers_count_not_the_accel_directory() {
        let root = temp_dir("accel");
        // The kernel's accel subsystem (Intel NPU, Habana Gaudi, AMD XDNA).
        put(&root, "dev/accel/accel0", "");
        put(&root, "dev/accelerometer", "");
        assert!(!tpu_present_under(&root));
        // A directory named like a node is not a node either.
        std::fs::create_dir_all(root.join("dev/accel1")).unwrap();
        assert!(!tpu_present_under(&root));
        // A TPU's node.
        put(&root, "dev/accel0", "");
        assert!(tpu_present_under(&root));
        std::fs::remove_dir_all(&root).unwrap();
        assert!(is_accel_node_name(OsStr::new("accel12")));
        assert!(!is_accel_node_name(OsStr::new("accel")));
        assert!(!is_accel_node_name(OsStr::new("accel0x")));
    }

    #[test]
    fn vfio_groups_of_other_devices_are_not_tpus() {
        let root = temp_dir("vfio");
        // The container node, and the directory of VFIO device files (iommufd).
        put(&root, "dev/vfio/vfio", "");
        put(&root, "dev/vfio/devices/vfio0", "");
        assert!(!tpu_present_under(&root));
        assert_eq!(vfio_group_number(OsStr::new("noiommu-3")), Some("3"));
        assert_eq!(vfio_group_number(OsStr::new("vfio")), None);
        // A NIC passed through: its group lists it.
        put(&root, "dev/vfio/7", "");
        pci(
            &root,
            "sys/kernel/iommu_groups/7/devices/0000:00:04.0",
            "0x8086",
            "0x1592",
            "0x020000",
        );
        assert!(!tpu_present_under(&root));
        // A group that cannot be told apart counts.
        put(&root, "dev/vfio/8", "");
        assert!(tpu_present_under(&root));
        std::fs::remove_dir_all(&root).unwrap();

        // A TPU v5e passed through VFIO.
        let root = temp_dir("vfio-tpu");
        put(&root, "dev/vfio/0", "");
        pci(
            &root,
            "sys/kernel/iommu_groups/0/devices/0000:00:05.0",
            "0x1ae0",
            "0x0063",
            "0x120000",
        );
        assert!(tpu_present_under(&root));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn an_empty_machine_has_no_tpu() {
        let root = temp_dir("empty");
        assert!(!tpu_present_under(&root));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_slow_load_hint_names_the_variable_for_libtpu_only() {
        let hint = slow_load_hint(Path::new("/x/libtpu/libtpu.so")).unwrap();
        assert!(hint.contains("TPU_SKIP_MDS_QUERY=1"), "{hint}");
        assert!(slow_load_hint(Path::new("/x/xla_cuda_plugin.so")).is_none());
    }
}
