//! The host side of sharded arrays, for [rpjrt](https://docs.rs/rpjrt): a device mesh with
//! named axes, partition specs, splitting a host array into one shard per device and
//! putting shards back together, and checking a spec against the sharding an executable
//! was compiled with.
//!
//! This crate moves data; it never decides a sharding. The mesh and the partition specs
//! are the ones the program was lowered with (in JAX: the `Mesh` and each argument's and
//! result's `PartitionSpec`). Mesh position `k` (row-major over the axes) holds the shard
//! the program's partition `k` reads or writes. Where a plugin reports an executable's
//! shardings, [`check_spec`] compares a spec with them, so that a spec the program was not
//! lowered with is refused instead of giving each partition another's block.
//!
//! ```
//! use rpjrt::ElementType;
//! use rpjrt_mesh::{assemble, split, HostShard, Mesh, PartitionSpec};
//!
//! let mesh = Mesh::new(&[("x", 2), ("y", 2)], &[0, 1, 2, 3])?;
//! let data: Vec<u8> = (0..24).collect(); // a 4 x 6 array of u8
//! let spec: PartitionSpec = vec![vec!["x".into()], vec!["y".into()]];
//! let (shards, shard_dims) = split(&data, ElementType::U8, &[4, 6], &mesh, &spec)?;
//! assert_eq!(shard_dims, [2, 3]);
//! assert_eq!(shards[1], [3, 4, 5, 9, 10, 11]);
//! let views: Vec<HostShard> = shards
//!     .iter()
//!     .map(|s| HostShard::new(s, ElementType::U8, &shard_dims))
//!     .collect();
//! assert_eq!(assemble(&views, ElementType::U8, &[4, 6], &mesh, &spec)?, data);
//! # Ok::<(), rpjrt::Error>(())
//! ```

#![forbid(unsafe_code)]

use rpjrt::{element_count, ElementType, Error, OpSharding, Result, ShardingType};

/// A logical grid of devices with named axes, like JAX's `Mesh`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mesh {
    axes: Vec<(String, usize)>,
    device_ids: Vec<i64>,
}

impl Mesh {
    /// A mesh with `axes` (name, size), major to minor, over `device_ids` in row-major mesh
    /// order (the order of the program's partitions).
    pub fn new(axes: &[(&str, usize)], device_ids: &[i64]) -> Result<Mesh> {
        let mut n = 1usize;
        // Sets, not scans of what came before: a mesh of a million devices (or axes) is
        // checked in linear time.
        let mut names = std::collections::HashSet::with_capacity(axes.len());
        for (k, (name, size)) in axes.iter().enumerate() {
            if name.is_empty() || *size == 0 {
                return Err(Error::invalid(format!(
                    "mesh axis {k} must have a name and a size of at least 1"
                )));
            }
            if !names.insert(*name) {
                return Err(Error::invalid(format!("mesh axis {name:?} is named twice")));
            }
            n = n.saturating_mul(*size);
        }
        if n != device_ids.len() {
            let shape = axes.iter().map(|a| a.1).collect::<Vec<_>>();
            return Err(Error::invalid(if n == usize::MAX {
                format!(
                    "a mesh of shape {shape:?} holds more devices than can be counted, but {} \
                     device ids were given",
                    device_ids.len()
                )
            } else {
                format!(
                    "a mesh of shape {shape:?} holds {n} devices, but {} device ids were given",
                    device_ids.len()
                )
            }));
        }
        let mut seen = std::collections::HashSet::with_capacity(device_ids.len());
        for id in device_ids {
            if *id < 0 {
                return Err(Error::invalid(format!(
                    "mesh device id {id} is negative (device ids count from 0)"
                )));
            }
            if !seen.insert(*id) {
                return Err(Error::invalid(format!("mesh names device {id} twice")));
            }
        }
        Ok(Mesh {
            axes: axes.iter().map(|(n, s)| (n.to_string(), *s)).collect(),
            device_ids: device_ids.to_vec(),
        })
    }

    /// The axes (name, size), major to minor.
    pub fn axes(&self) -> &[(String, usize)] {
        &self.axes
    }

    /// The device ids in row-major mesh order.
    pub fn device_ids(&self) -> &[i64] {
        &self.device_ids
    }

    /// The coordinates of mesh position `flat`.
    fn coords(&self, mut flat: usize) -> Vec<usize> {
        let mut c = vec![0; self.axes.len()];
        for (k, (_, size)) in self.axes.iter().enumerate().rev() {
            c[k] = flat % size;
            flat /= size;
        }
        c
    }

    fn axis(&self, name: &str) -> Result<usize> {
        self.axes
            .iter()
            .position(|(n, _)| n == name)
            .ok_or_else(|| {
                Error::invalid(format!(
                "the partition spec names axis {name:?}, which the mesh does not have (axes: {})",
                self.axes
                    .iter()
                    .map(|a| a.0.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            })
    }
}

/// How each dimension of an array is split: for dimension `d`, the mesh axes (major to
/// minor) it is split along; an empty list means the dimension is not split. Dimensions
/// past the spec's length are not split. Axes the spec does not name replicate the array.
pub type PartitionSpec = Vec<Vec<String>>;

/// One device's block of an array: which block of each dimension it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardLayout {
    /// The shard's dimensions.
    pub shard_dims: Vec<i64>,
    /// For each mesh position (row-major), the block index along each dimension.
    pub blocks: Vec<Vec<usize>>,
}

/// Works out each device's block of an array of `dims` under `spec` on `mesh`.
pub fn shard_layout(mesh: &Mesh, spec: &PartitionSpec, dims: &[i64]) -> Result<ShardLayout> {
    let (parts, blocks) = spec_tiling(mesh, spec, dims.len(), "array")?;
    let mut shard_dims = dims.to_vec();
    for (d, (&n, &p)) in dims.iter().zip(&parts).enumerate() {
        if n < 0 || !(n as usize).is_multiple_of(p) {
            return Err(Error::invalid(format!(
                "dimension {d} has size {n}, which does not split evenly into {p} parts"
            )));
        }
        shard_dims[d] = n / p as i64;
    }
    Ok(ShardLayout { shard_dims, blocks })
}

/// How `spec` cuts a value of `rank` dimensions on `mesh`: the number of blocks along each
/// dimension, and for each mesh position the block it holds along each dimension.
/// `value` names the value in the message about a spec longer than its rank.
fn spec_tiling(
    mesh: &Mesh,
    spec: &PartitionSpec,
    rank: usize,
    value: &str,
) -> Result<(Vec<usize>, Vec<Vec<usize>>)> {
    if spec.len() > rank {
        return Err(Error::invalid(format!(
            "the partition spec has {} entries, but the {value} has {rank} dimensions",
            spec.len()
        )));
    }
    let mut used: Vec<&str> = Vec::new();
    let mut axes_of: Vec<Vec<usize>> = Vec::with_capacity(rank);
    let mut parts = vec![1usize; rank];
    for (d, p) in parts.iter_mut().enumerate() {
        let names = spec.get(d).map(|v| v.as_slice()).unwrap_or(&[]);
        let mut idx = Vec::new();
        for name in names {
            if used.contains(&name.as_str()) {
                return Err(Error::invalid(format!(
                    "the partition spec uses mesh axis {name:?} twice"
                )));
            }
            used.push(name);
            let a = mesh.axis(name)?;
            *p *= mesh.axes[a].1;
            idx.push(a);
        }
        axes_of.push(idx);
    }
    let blocks = (0..mesh.device_ids.len())
        .map(|flat| {
            let c = mesh.coords(flat);
            axes_of
                .iter()
                .map(|axes| {
                    axes.iter()
                        .fold(0usize, |acc, &a| acc * mesh.axes[a].1 + c[a])
                })
                .collect()
        })
        .collect();
    Ok((parts, blocks))
}

/// The global dims of an array whose shards (one per mesh position, laid out by `spec`)
/// have `shard_dims`: [`shard_layout`]'s inverse. Each dimension grows by the sizes of the
/// mesh axes the spec splits it along; axes the mesh lacks, or named twice, are errors.
pub fn global_dims(mesh: &Mesh, spec: &PartitionSpec, shard_dims: &[i64]) -> Result<Vec<i64>> {
    if let Some((d, n)) = shard_dims.iter().enumerate().find(|(_, n)| **n < 0) {
        return Err(Error::invalid(format!(
            "shard dimension {d} is negative ({n})"
        )));
    }
    let mut full = shard_dims.to_vec();
    for (d, names) in spec.iter().enumerate() {
        for name in names {
            let n = mesh.axes[mesh.axis(name)?].1 as i64;
            let dim = full.get_mut(d).ok_or_else(|| {
                Error::invalid(format!(
                    "the partition spec has {} entries, but the shards have {} dimensions",
                    spec.len(),
                    shard_dims.len()
                ))
            })?;
            *dim = dim.checked_mul(n).ok_or_else(|| {
                Error::invalid(format!("dimension {d} overflows when multiplied by {n}"))
            })?;
        }
    }
    // The same checks as splitting (axes used twice, even splits), on the result.
    let back = shard_layout(mesh, spec, &full)?;
    debug_assert_eq!(back.shard_dims, shard_dims);
    Ok(full)
}

fn check_host(element_type: ElementType, dims: &[i64], len: usize) -> Result<usize> {
    if element_type.is_sub_byte() {
        return Err(Error::invalid(format!(
            "splitting {element_type} arrays is not supported (sub-byte types are packed)"
        )));
    }
    let count = element_count(dims)?;
    let need = element_type.dense_byte_size(count)?;
    if len != need {
        return Err(Error::invalid(format!(
            "the host data has {len} bytes, but {element_type}{dims:?} needs {need}"
        )));
    }
    element_type.dense_byte_size(1)
}

/// Calls `row(full, shard, len)` for each row along the last dimension of block `block` of
/// a row-major array: its byte offset in the full array and in the dense shard, and the
/// length every row has. Nothing for a block with no elements; one row for a rank-0
/// value. The rows are walked, not collected: a block of many short rows needs no
/// allocation of its own.
fn for_block_rows(
    dims: &[i64],
    shard_dims: &[i64],
    block: &[usize],
    item: usize,
    mut row: impl FnMut(usize, usize, usize),
) {
    let rank = dims.len();
    if rank == 0 {
        row(0, 0, item);
        return;
    }
    let sd: Vec<usize> = shard_dims.iter().map(|&d| d as usize).collect();
    let fd: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
    if sd.contains(&0) {
        return;
    }
    let len = sd[rank - 1] * item;
    let rows: usize = sd[..rank - 1].iter().product();
    let mut idx = vec![0usize; rank - 1];
    for r in 0..rows {
        let mut off = 0usize;
        for d in 0..rank {
            let i = if d < rank - 1 { idx[d] } else { 0 };
            off = off * fd[d] + block[d] * sd[d] + i;
        }
        row(off * item, r * len, len);
        for d in (0..rank - 1).rev() {
            idx[d] += 1;
            if idx[d] < sd[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// A checked split of one dense row-major host array by a mesh and spec ([`split_plan`]):
/// the shard dims and bytes, and the copy of each mesh position's shard into a buffer the
/// caller allocated (so that a caller with its own allocator, e.g. Python's, makes one
/// copy, and a failed allocation is its to report).
#[derive(Clone, Debug)]
pub struct SplitPlan {
    dims: Vec<i64>,
    layout: ShardLayout,
    item: usize,
    shard_bytes: usize,
    data_bytes: usize,
}

/// Checks a split of `data_bytes` bytes of `element_type` and `dims` by `spec` on `mesh`
/// (the same checks as [`split`]), without copying anything.
pub fn split_plan(
    data_bytes: usize,
    element_type: ElementType,
    dims: &[i64],
    mesh: &Mesh,
    spec: &PartitionSpec,
) -> Result<SplitPlan> {
    let item = check_host(element_type, dims, data_bytes)?;
    let layout = shard_layout(mesh, spec, dims)?;
    let shard_bytes = element_type.dense_byte_size(element_count(&layout.shard_dims)?)?;
    Ok(SplitPlan {
        dims: dims.to_vec(),
        layout,
        item,
        shard_bytes,
        data_bytes,
    })
}

impl SplitPlan {
    /// Each shard's dims.
    pub fn shard_dims(&self) -> &[i64] {
        &self.layout.shard_dims
    }

    /// Each shard's size in bytes.
    pub fn shard_bytes(&self) -> usize {
        self.shard_bytes
    }

    /// The number of shards (the mesh's devices).
    pub fn shards(&self) -> usize {
        self.layout.blocks.len()
    }

    /// Copies mesh position `position`'s shard of `data` (the array the plan was made
    /// for) into `out`, which must be [`SplitPlan::shard_bytes`] long.
    pub fn write_shard(&self, data: &[u8], position: usize, out: &mut [u8]) -> Result<()> {
        let block = self.layout.blocks.get(position).ok_or_else(|| {
            Error::invalid(format!(
                "shard {position} asked for, but the mesh has {} devices",
                self.shards()
            ))
        })?;
        if data.len() != self.data_bytes || out.len() != self.shard_bytes {
            return Err(Error::invalid(format!(
                "a split planned for {} bytes into shards of {} was given {} bytes and a \
                 shard buffer of {}",
                self.data_bytes,
                self.shard_bytes,
                data.len(),
                out.len()
            )));
        }
        for_block_rows(
            &self.dims,
            &self.layout.shard_dims,
            block,
            self.item,
            |f, o, len| out[o..o + len].copy_from_slice(&data[f..f + len]),
        );
        Ok(())
    }
}

/// Splits a dense row-major host array into one shard per mesh position (row-major mesh
/// order), each dense row-major, by the given mesh and partition spec. Each shard is
/// allocated fallibly: memory running out is an [`Error::ResourceExhausted`] naming the
/// size, never an abort (a replicated spec makes one full copy per device).
pub fn split(
    data: &[u8],
    element_type: ElementType,
    dims: &[i64],
    mesh: &Mesh,
    spec: &PartitionSpec,
) -> Result<(Vec<Vec<u8>>, Vec<i64>)> {
    let plan = split_plan(data.len(), element_type, dims, mesh, spec)?;
    let mut shards = Vec::new();
    shards.try_reserve_exact(plan.shards()).map_err(|_| {
        Error::ResourceExhausted(format!(
            "splitting an array into {} shards cannot allocate the list of shards",
            plan.shards()
        ))
    })?;
    for k in 0..plan.shards() {
        let what = format!("shard {k} of {} (split)", plan.shards());
        let mut s = rpjrt::host::try_zeroed(plan.shard_bytes, &what)?;
        plan.write_shard(data, k, &mut s)?;
        shards.push(s);
    }
    Ok((shards, plan.layout.shard_dims))
}

/// One shard handed to [`assemble`]: its dense row-major bytes with the element type and
/// dims they hold, so that a shard of another type or shape is refused rather than its
/// bytes reinterpreted.
#[derive(Clone, Copy, Debug)]
pub struct HostShard<'a> {
    /// The shard's dense row-major bytes.
    pub data: &'a [u8],
    /// The element type the bytes hold.
    pub element_type: ElementType,
    /// The shard's dims.
    pub dims: &'a [i64],
}

impl<'a> HostShard<'a> {
    /// A shard of `element_type` and `dims` over `data`.
    pub fn new(data: &'a [u8], element_type: ElementType, dims: &'a [i64]) -> HostShard<'a> {
        HostShard {
            data,
            element_type,
            dims,
        }
    }
}

/// The checks of [`assemble`], with nothing copied or allocated: the size in bytes of the
/// array the shards make (what [`assemble_into`] writes), or the refusal [`assemble`]
/// would give.
pub fn assemble_bytes(
    shards: &[HostShard<'_>],
    element_type: ElementType,
    dims: &[i64],
    mesh: &Mesh,
    spec: &PartitionSpec,
) -> Result<usize> {
    Ok(assemble_check(shards, element_type, dims, mesh, spec)?.0)
}

/// Reassembles a dense row-major host array of `element_type` and `dims` from one shard per
/// mesh position (row-major mesh order). Every shard is checked before any is copied: its
/// element type must be `element_type`, its dims the shard dims the spec gives, and its
/// bytes that many; the first that differs is named. Where the spec replicates, the first
/// position holding a block supplies it. The result is allocated fallibly
/// ([`Error::ResourceExhausted`] naming its size, never an abort).
pub fn assemble(
    shards: &[HostShard<'_>],
    element_type: ElementType,
    dims: &[i64],
    mesh: &Mesh,
    spec: &PartitionSpec,
) -> Result<Vec<u8>> {
    // The checks first: a wrong call is refused before anything is allocated.
    let total = assemble_check(shards, element_type, dims, mesh, spec)?.0;
    let mut full = rpjrt::host::try_zeroed(total, "the assembled array")?;
    assemble_into(shards, element_type, dims, mesh, spec, &mut full)?;
    Ok(full)
}

/// The checks of [`assemble`]: the array's size in bytes and the shard layout.
fn assemble_check(
    shards: &[HostShard<'_>],
    element_type: ElementType,
    dims: &[i64],
    mesh: &Mesh,
    spec: &PartitionSpec,
) -> Result<(usize, ShardLayout, usize)> {
    // First: a shard of another type is the caller's mistake whatever the type.
    if let Some(k) = shards.iter().position(|s| s.element_type != element_type) {
        return Err(Error::invalid(format!(
            "shard {k} is {}, but the array is {element_type}: shards must all have the \
             array's element type (convert it first)",
            shards[k].element_type
        )));
    }
    let total = element_type.dense_byte_size(element_count(dims)?)?;
    let item = check_host(element_type, dims, total)?;
    let layout = shard_layout(mesh, spec, dims)?;
    if shards.len() != layout.blocks.len() {
        return Err(Error::invalid(format!(
            "{} shards given, but the mesh has {} devices",
            shards.len(),
            layout.blocks.len()
        )));
    }
    let n = element_type.dense_byte_size(element_count(&layout.shard_dims)?)?;
    for (k, s) in shards.iter().enumerate() {
        if s.dims != layout.shard_dims.as_slice() {
            return Err(Error::invalid(format!(
                "shard {k} has dims {:?}, but a {element_type}{dims:?} array split by this \
                 spec has shards of dims {:?}",
                s.dims, layout.shard_dims
            )));
        }
        if s.data.len() != n {
            return Err(Error::invalid(format!(
                "shard {k} has {} bytes, but a {element_type}{:?} shard needs {n}",
                s.data.len(),
                layout.shard_dims
            )));
        }
    }
    Ok((total, layout, item))
}

/// [`assemble`] into `out`, a buffer of the caller's that must be [`assemble_bytes`] long:
/// the same checks, and no allocation the size of the array.
pub fn assemble_into(
    shards: &[HostShard<'_>],
    element_type: ElementType,
    dims: &[i64],
    mesh: &Mesh,
    spec: &PartitionSpec,
    out: &mut [u8],
) -> Result<()> {
    let (total, layout, item) = assemble_check(shards, element_type, dims, mesh, spec)?;
    if out.len() != total {
        return Err(Error::invalid(format!(
            "the output buffer has {} bytes, but {element_type}{dims:?} needs {total}",
            out.len()
        )));
    }
    // Each block once (the first position holding it): a set, so a large mesh is linear.
    let mut done = std::collections::HashSet::with_capacity(layout.blocks.len().min(1 << 16));
    for (b, s) in layout.blocks.iter().zip(shards) {
        if !done.insert(b) {
            continue;
        }
        for_block_rows(dims, &layout.shard_dims, b, item, |f, o, len| {
            out[f..f + len].copy_from_slice(&s.data[o..o + len])
        });
    }
    Ok(())
}

/// Checks that `spec` cuts a value of `rank` dimensions on `mesh` the way `sharding` does:
/// an executable's sharding of one parameter or output, as
/// [`rpjrt::Executable::parameter_shardings`] and
/// [`rpjrt::Executable::output_shardings`] report it. Mesh position `k` is the program's
/// partition `k`, so the spec must cut each dimension into as many blocks as the sharding,
/// and give every position the block the sharding gives its partition.
///
/// A sharding of an SPMD program names partitions, so this check applies to programs of
/// one replica whose partitions are the mesh's devices. A maximal sharding (the whole
/// value on one partition) matches only a spec that splits nothing. A manual or unreduced
/// sharding (or one whose trailing device groups are) leaves each partition a value of its
/// own, not a block of one array: every spec is refused. Unknown shardings and tuples say
/// nothing: they pass. A mismatch is an [`Error::InvalidArgument`] that says where the two
/// differ; the caller names the value.
///
/// ```
/// use rpjrt::OpSharding;
/// use rpjrt_mesh::{check_spec, Mesh};
///
/// // Rows split over the first of two 2-device axes, replicated over the second
/// // ("{devices=[2,1,2]<=[4] last_tile_dim_replicate}"), as XLA serializes it.
/// let sharding = OpSharding::decode(&[8, 3, 26, 3, 2, 1, 2, 48, 1, 74, 1, 4])?;
/// let mesh = Mesh::new(&[("x", 2), ("y", 2)], &[0, 1, 2, 3])?;
/// assert!(check_spec(&mesh, &vec![vec!["x".into()], vec![]], 2, &sharding).is_ok());
/// let wrong = check_spec(&mesh, &vec![vec!["y".into()], vec![]], 2, &sharding);
/// assert!(wrong.unwrap_err().to_string().contains("mesh position 1"));
/// # Ok::<(), rpjrt::Error>(())
/// ```
pub fn check_spec(
    mesh: &Mesh,
    spec: &PartitionSpec,
    rank: usize,
    sharding: &OpSharding,
) -> Result<()> {
    let (parts, blocks) = spec_tiling(mesh, spec, rank, "value")?;
    let n = mesh.device_ids.len();
    let theirs = match sharding.kind {
        ShardingType::Replicated => (vec![1; rank], vec![vec![0; rank]; n]),
        ShardingType::Maximal => {
            let holder = sharding.devices().first().copied().unwrap_or(-1);
            if usize::try_from(holder).map_or(true, |h| h >= n) {
                return Err(Error::invalid(format!(
                    "the executable's sharding {sharding} names partition {holder}, outside \
                     the mesh's {n}"
                )));
            }
            if let Some(d) = parts.iter().position(|&p| p > 1) {
                return Err(Error::invalid(format!(
                    "the spec cuts dimension {d} into {} blocks, but the executable's \
                     sharding {sharding} keeps the whole value on one partition",
                    parts[d]
                )));
            }
            return Ok(());
        }
        ShardingType::Other => sharding_tiling(sharding, rank, n)?,
        ShardingType::Manual | ShardingType::Unreduced => return Err(not_blocks(sharding)),
        ShardingType::Unknown | ShardingType::Tuple => return Ok(()),
    };
    for (d, (&mine, &want)) in parts.iter().zip(&theirs.0).enumerate() {
        if mine != want {
            return Err(Error::invalid(format!(
                "the spec cuts dimension {d} into {mine} block{}, but the executable's \
                 sharding {sharding} cuts it into {want}",
                if mine == 1 { "" } else { "s" }
            )));
        }
    }
    match blocks.iter().zip(&theirs.1).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(k) => Err(Error::invalid(format!(
            "the spec gives mesh position {k} (device {}) block {:?}, but the executable's \
             sharding {sharding} gives its partition {k} block {:?}",
            mesh.device_ids[k], blocks[k], theirs.1[k]
        ))),
    }
}

/// The refusal of a sharding whose partitions hold values of their own (manual: each
/// partition's value is the program's business; unreduced: partial results still to be
/// summed), not blocks of one array.
fn not_blocks(s: &OpSharding) -> Error {
    Error::invalid(format!(
        "the executable's sharding {s} leaves each partition a value of its own (manual or \
         unreduced), not a block of one array: no partition spec describes it, and putting \
         its shards together would give a wrong array"
    ))
}

/// A tiled sharding's blocks per dimension, and the block of each of `partitions`
/// partitions, for a value of `rank` dimensions.
fn sharding_tiling(
    s: &OpSharding,
    rank: usize,
    partitions: usize,
) -> Result<(Vec<usize>, Vec<Vec<usize>>)> {
    if s.last_tile_dims
        .iter()
        .any(|t| matches!(t, ShardingType::Manual | ShardingType::Unreduced))
    {
        return Err(not_blocks(s));
    }
    let trailing = usize::from(s.replicate_on_last_tile_dim) + s.last_tile_dims.len();
    let tile = &s.tile_assignment_dimensions;
    let own = tile.len().saturating_sub(trailing);
    if own != rank {
        return Err(Error::invalid(format!(
            "the executable's sharding {s} is for a value of {own} dimensions, but this one \
             has {rank}"
        )));
    }
    let devices = s.devices();
    if devices.len() != partitions {
        return Err(Error::invalid(format!(
            "the executable's sharding {s} spans {} partitions, but the mesh has {partitions} \
             devices",
            devices.len()
        )));
    }
    // Decoding checked that the tile dimensions are non-negative and multiply to the
    // device count.
    let dims: Vec<usize> = tile.iter().map(|&d| d as usize).collect();
    let mut blocks: Vec<Option<Vec<usize>>> = vec![None; partitions];
    for (flat, &dev) in devices.iter().enumerate() {
        let mut c = vec![0usize; dims.len()];
        let mut rest = flat;
        for (i, &d) in dims.iter().enumerate().rev() {
            c[i] = rest % d;
            rest /= d;
        }
        c.truncate(rank);
        let slot = usize::try_from(dev)
            .ok()
            .and_then(|k| blocks.get_mut(k))
            .filter(|b| b.is_none())
            .ok_or_else(|| {
                Error::invalid(format!(
                    "the executable's sharding {s} names partition {dev} twice or outside \
                     the mesh's {partitions}"
                ))
            })?;
        *slot = Some(c);
    }
    Ok((
        dims[..rank].to_vec(),
        blocks.into_iter().map(|b| b.unwrap_or_default()).collect(),
    ))
}

/// The global shapes of an entry function's parameters and results, read from its MLIR
/// signature text as [`rpjrt::Executable::source_signature`] gives it
/// (`(%a: tensor<3x4xf32> {...}) -> (tensor<4xf32> {...})`): for each, its dims where it
/// is a ranked tensor of static shape, else `None` (a token, a tuple, a dynamic
/// dimension). `None` when the text is not such a signature.
///
/// The compiled program of a partitioned executable reports only each partition's
/// (padded) shape; these are the shapes the program was written for, which host arrays
/// are checked against so that an uneven sharding (XLA pads it) is refused rather than a
/// padded or cut array returned.
#[allow(clippy::type_complexity)]
pub fn signature_dims(signature: &str) -> Option<(Vec<Option<Vec<i64>>>, Vec<Option<Vec<i64>>>)> {
    let sig = signature.trim_start();
    let params_end = closing(sig)?;
    let params = top_level(&sig[1..params_end])
        .into_iter()
        .map(|p| {
            let colon = top_level_find(p, b':')?;
            tensor_dims(&p[colon + 1..])
        })
        .collect();
    let rest = sig[params_end + 1..].trim_start();
    let Some(results) = rest.strip_prefix("->") else {
        return Some((params, Vec::new()));
    };
    let results = results.trim_start();
    let results = if results.starts_with('(') {
        let end = closing(results)?;
        top_level(&results[1..end])
            .into_iter()
            .map(tensor_dims)
            .collect()
    } else {
        vec![tensor_dims(results)]
    };
    Some((params, results))
}

/// Walks `s` outside string literals, calling `visit(index, byte, depth)` with the bracket
/// depth after each byte (`->` is not a closing bracket); the first index `visit` stops
/// at.
fn scan(s: &str, mut visit: impl FnMut(usize, u8, i32) -> bool) -> Option<usize> {
    let b = s.as_bytes();
    let (mut depth, mut in_str, mut esc) = (0i32, false, false);
    for (i, &c) in b.iter().enumerate() {
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => {
                in_str = true;
                continue;
            }
            b'(' | b'<' | b'{' | b'[' => depth += 1,
            b'>' if i > 0 && b[i - 1] == b'-' => {}
            b')' | b'>' | b'}' | b']' => depth -= 1,
            _ => {}
        }
        if visit(i, c, depth) {
            return Some(i);
        }
    }
    None
}

/// The index of the bracket closing the one `s` starts with.
fn closing(s: &str) -> Option<usize> {
    scan(s, |_, _, d| d == 0)
}

/// The first `byte` of `s` outside brackets and strings.
fn top_level_find(s: &str, byte: u8) -> Option<usize> {
    scan(s, |_, c, d| c == byte && d == 0)
}

/// `s` split at its commas outside brackets and strings; nothing for blank text.
fn top_level(s: &str) -> Vec<&str> {
    if s.trim().is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut start = 0;
    scan(s, |i, c, d| {
        if c == b',' && d == 0 {
            out.push(&s[start..i]);
            start = i + 1;
        }
        false
    });
    out.push(&s[start..]);
    out
}

/// The dims of the tensor type `s` starts with (`tensor<3x4xf32> ...` gives [3, 4]);
/// `None` for another type or a dynamic dimension.
fn tensor_dims(s: &str) -> Option<Vec<i64>> {
    let inner = s.trim_start().strip_prefix("tensor<")?;
    let mut rest = &inner[..inner.find([',', '>'])?];
    let mut dims = Vec::new();
    while let Some((d, r)) = rest.split_once('x') {
        match d.trim().parse::<i64>() {
            Ok(n) if n >= 0 => dims.push(n),
            // `?` (dynamic) or a negative size: no static shape.
            _ if d.trim() == "?" || d.trim().starts_with('-') => return None,
            // The element type (`complex<f32>` reads as far as its `<`).
            _ => break,
        }
        rest = r;
    }
    Some(dims)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_dims_read_global_shapes() {
        let sig = "(%a: tensor<3x4xf32> {mhlo.sharding = \"{devices=[2,1]<=[2]}\"}, %b: tensor<f32> loc(\"b, c\"))\n    -> (tensor<4xf32> {mhlo.sharding = \"{replicated}\"}, tensor<2x?xi32>)";
        let (p, r) = signature_dims(sig).unwrap();
        assert_eq!(p, vec![Some(vec![3, 4]), Some(vec![])]);
        assert_eq!(r, vec![Some(vec![4]), None]);
        let (p, r) = signature_dims("() -> ()").unwrap();
        assert!(p.is_empty() && r.is_empty());
        let (p, r) = signature_dims("(%a: !stablehlo.token) -> tensor<2x3xcomplex<f32>>").unwrap();
        assert_eq!((p, r), (vec![None], vec![Some(vec![2, 3])]));
        let (p, r) = signature_dims("(%x: tensor<8xf32>)").unwrap();
        assert_eq!((p, r), (vec![Some(vec![8])], vec![]));
        let (_, r) = signature_dims("(%x: tensor<8xf32>) -> tensor<f32> attributes {x}").unwrap();
        assert_eq!(r, vec![Some(vec![])]);
        assert!(signature_dims("(%x: tensor<8xf32>").is_none());
    }

    #[test]
    fn split_and_assemble_fail_cleanly_and_assemble_into_checks_first() {
        let mesh = Mesh::new(&[("x", 2)], &[0, 1]).unwrap();
        let sp = spec(&[&["x"]]);
        let data: Vec<u8> = (0..8).collect();
        let plan = split_plan(8, ElementType::U8, &[8], &mesh, &sp).unwrap();
        assert_eq!(
            (plan.shards(), plan.shard_bytes(), plan.shard_dims()),
            (2, 4, &[4i64][..])
        );
        let mut out = [0u8; 4];
        plan.write_shard(&data, 1, &mut out).unwrap();
        assert_eq!(out, [4, 5, 6, 7]);
        assert!(plan.write_shard(&data, 2, &mut out).is_err());
        assert!(plan.write_shard(&data[..7], 0, &mut out).is_err());
        let shards = [
            HostShard::new(&data[..4], ElementType::U8, &[4]),
            HostShard::new(&data[4..], ElementType::U8, &[4]),
        ];
        assert_eq!(
            assemble_bytes(&shards, ElementType::U8, &[8], &mesh, &sp).unwrap(),
            8
        );
        let mut full = [0u8; 7];
        let e = assemble_into(&shards, ElementType::U8, &[8], &mesh, &sp, &mut full).unwrap_err();
        assert!(
            e.to_string().contains("the output buffer has 7 bytes"),
            "{e}"
        );
        // The allocator split and assemble use refuses rather than aborts.
        let e = rpjrt::host::try_zeroed(usize::MAX, "x").unwrap_err();
        assert!(matches!(e, Error::ResourceExhausted(_)), "{e}");
    }

    #[test]
    fn meshes_refuse_repeats_and_negative_ids_in_linear_time() {
        let err =
            |axes: &[(&str, usize)], ids: &[i64]| Mesh::new(axes, ids).unwrap_err().to_string();
        assert!(err(&[("x", 2)], &[0, -1]).contains("device id -1 is negative"));
        assert!(err(&[("x", 3)], &[4, 5, 4]).contains("names device 4 twice"));
        assert!(err(&[("x", 1), ("y", 1), ("x", 1)], &[0]).contains("\"x\" is named twice"));
        // A million devices: the old pairwise checks took minutes here.
        let ids: Vec<i64> = (0..1 << 20).collect();
        assert_eq!(
            Mesh::new(&[("x", 1 << 10), ("y", 1 << 10)], &ids)
                .unwrap()
                .device_ids()
                .len(),
            1 << 20
        );
    }

    #[test]
    fn global_dims_invert_the_layout() {
        let m = Mesh::new(&[("x", 2), ("y", 3)], &[0, 1, 2, 3, 4, 5]).unwrap();
        let spec: PartitionSpec = vec![vec!["x".into()], vec![], vec!["y".into(), "x".into()]];
        let spec2: PartitionSpec = vec![vec!["x".into()], vec!["y".into()]];
        assert_eq!(global_dims(&m, &spec2, &[4, 5]).unwrap(), vec![8, 15]);
        assert_eq!(
            shard_layout(&m, &spec2, &[8, 15]).unwrap().shard_dims,
            vec![4, 5]
        );
        let e = global_dims(&m, &spec, &[1, 2, 3]).unwrap_err().to_string();
        assert!(e.contains("twice"), "{e}");
        assert_eq!(global_dims(&m, &vec![], &[7]).unwrap(), vec![7]);
        let e = global_dims(&m, &vec![vec!["z".into()]], &[1])
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"z\""), "{e}");
        let e = global_dims(&m, &spec2, &[4]).unwrap_err().to_string();
        assert!(e.contains("2 entries"), "{e}");
    }

    fn spec(v: &[&[&str]]) -> PartitionSpec {
        v.iter()
            .map(|a| a.iter().map(|s| s.to_string()).collect())
            .collect()
    }

    #[test]
    fn split_and_assemble_round_trip() {
        let mesh = Mesh::new(&[("x", 2), ("y", 2)], &[0, 1, 2, 3]).unwrap();
        let data: Vec<u8> = (0..24u8).collect();
        // 4 x 6 u8 array: rows split over x, columns over y.
        let (shards, sd) = split(
            &data,
            ElementType::U8,
            &[4, 6],
            &mesh,
            &spec(&[&["x"], &["y"]]),
        )
        .unwrap();
        assert_eq!(sd, vec![2, 3]);
        assert_eq!(shards[0], vec![0, 1, 2, 6, 7, 8]);
        assert_eq!(shards[1], vec![3, 4, 5, 9, 10, 11]);
        assert_eq!(shards[2], vec![12, 13, 14, 18, 19, 20]);
        let refs: Vec<HostShard> = shards
            .iter()
            .map(|s| HostShard::new(s, ElementType::U8, &sd))
            .collect();
        let back = assemble(
            &refs,
            ElementType::U8,
            &[4, 6],
            &mesh,
            &spec(&[&["x"], &["y"]]),
        )
        .unwrap();
        assert_eq!(back, data);
        // Rows over x, replicated over y.
        let (shards, sd) = split(&data, ElementType::U8, &[4, 6], &mesh, &spec(&[&["x"]])).unwrap();
        assert_eq!(sd, vec![2, 6]);
        assert_eq!(shards[0], shards[1]);
        assert_eq!(shards[2], (12..24u8).collect::<Vec<_>>());
        // Rows over both axes (x major).
        let (shards, _) = split(
            &data,
            ElementType::U8,
            &[4, 6],
            &mesh,
            &spec(&[&["x", "y"]]),
        )
        .unwrap();
        assert_eq!(shards[1], (6..12u8).collect::<Vec<_>>());
        assert_eq!(shards[2], (12..18u8).collect::<Vec<_>>());
    }

    #[test]
    fn assemble_refuses_a_shard_of_another_type_or_shape() {
        let mesh = Mesh::new(&[("x", 2)], &[0, 1]).unwrap();
        let sp = spec(&[&["x"]]);
        let (a, b) = (1.0f32.to_ne_bytes(), 7i32.to_ne_bytes());
        let good = HostShard::new(&a, ElementType::F32, &[1]);
        let refused = |shards: &[HostShard<'_>]| {
            assemble(shards, ElementType::F32, &[2], &mesh, &sp)
                .unwrap_err()
                .to_string()
        };
        // Same byte count, other type: refused, naming the shard, not reinterpreted.
        let e = refused(&[good, HostShard::new(&b, ElementType::S32, &[1])]);
        assert!(
            e.contains("shard 1 is int32") && e.contains("float32"),
            "{e}"
        );
        // Same bytes, other shape.
        let e = refused(&[good, HostShard::new(&a, ElementType::F32, &[1, 1])]);
        assert!(e.contains("shard 1 has dims [1, 1]"), "{e}");
        let e = refused(&[HostShard::new(&a[..2], ElementType::F32, &[1]), good]);
        assert!(e.contains("shard 0 has 2 bytes"), "{e}");
        let ok = assemble(&[good, good], ElementType::F32, &[2], &mesh, &sp).unwrap();
        assert_eq!(ok, [a, a].concat());
    }

    #[test]
    fn bad_specs_are_refused() {
        let mesh = Mesh::new(&[("x", 2)], &[0, 1]).unwrap();
        let data = vec![0u8; 12];
        let e = split(&data, ElementType::F32, &[3], &mesh, &spec(&[&["x"]])).unwrap_err();
        assert!(e.to_string().contains("does not split evenly"), "{e}");
        // A negative shard dimension is named as such (it read as an uneven split of
        // twice its size), and a mesh too large to count does not print a saturated count.
        let e = global_dims(&mesh, &spec(&[&["x"]]), &[-3]).unwrap_err();
        assert!(
            e.to_string().contains("shard dimension 0 is negative (-3)"),
            "{e}"
        );
        let e = Mesh::new(&[("x", usize::MAX), ("y", 2)], &[0]).unwrap_err();
        assert!(
            e.to_string().contains("more devices than can be counted"),
            "{e}"
        );
        let e = split(&data, ElementType::F32, &[3], &mesh, &spec(&[&["z"]])).unwrap_err();
        assert!(e.to_string().contains("\"z\""), "{e}");
        let e = split(&data, ElementType::F32, &[4], &mesh, &spec(&[])).unwrap_err();
        assert!(e.to_string().contains("12 bytes"), "{e}");
        assert!(Mesh::new(&[("x", 2)], &[0, 0]).is_err());
        assert!(Mesh::new(&[("x", 3)], &[0, 1]).is_err());
    }

    fn tiled(dims: &[i64], devices: &[i64], replicate_last: bool) -> OpSharding {
        OpSharding {
            kind: ShardingType::Other,
            tile_assignment_dimensions: dims.to_vec(),
            tile_assignment_devices: devices.to_vec(),
            iota_reshape_dims: Vec::new(),
            iota_transpose_perm: Vec::new(),
            replicate_on_last_tile_dim: replicate_last,
            last_tile_dims: Vec::new(),
            tuple_shardings: Vec::new(),
            shard_group: None,
        }
    }

    #[test]
    fn specs_match_shardings_by_blocks_not_by_form() {
        let mesh = Mesh::new(&[("x", 2), ("y", 2)], &[0, 1, 2, 3]).unwrap();
        // Rows over x, columns over y, listed explicitly or as an iota: the same tiling.
        let listed = tiled(&[2, 2], &[0, 1, 2, 3], false);
        let mut iota = tiled(&[2, 2], &[], false);
        iota.iota_reshape_dims = vec![4];
        for s in [&listed, &iota] {
            check_spec(&mesh, &spec(&[&["x"], &["y"]]), 2, s).unwrap();
            let e = check_spec(&mesh, &spec(&[&["y"], &["x"]]), 2, s).unwrap_err();
            assert!(
                e.to_string()
                    .contains("mesh position 1 (device 1) block [1, 0]"),
                "{e}"
            );
        }
        // Rows over y, columns over x: XLA writes it as a transposed iota.
        let mut transposed = tiled(&[2, 2], &[], false);
        transposed.iota_reshape_dims = vec![2, 2];
        transposed.iota_transpose_perm = vec![1, 0];
        check_spec(&mesh, &spec(&[&["y"], &["x"]]), 2, &transposed).unwrap();
        assert!(check_spec(&mesh, &spec(&[&["x"], &["y"]]), 2, &transposed).is_err());
        // Rows over both axes, y major.
        let both = tiled(&[4, 1], &[0, 2, 1, 3], false);
        check_spec(&mesh, &spec(&[&["y", "x"]]), 2, &both).unwrap();
        let e = check_spec(&mesh, &spec(&[&["x", "y"]]), 2, &both).unwrap_err();
        assert!(e.to_string().contains("position 1"), "{e}");
        // Replicated: only a spec that splits nothing.
        let mut rep = tiled(&[], &[], false);
        rep.kind = ShardingType::Replicated;
        check_spec(&mesh, &spec(&[]), 3, &rep).unwrap();
        let e = check_spec(&mesh, &spec(&[&[], &["y"]]), 2, &rep).unwrap_err();
        assert!(e.to_string().contains("dimension 1 into 2 blocks"), "{e}");
        // Maximal: the whole value on one partition.
        let mut max = tiled(&[1], &[2], false);
        max.kind = ShardingType::Maximal;
        check_spec(&mesh, &spec(&[]), 1, &max).unwrap();
        let e = check_spec(&mesh, &spec(&[&["x"]]), 1, &max).unwrap_err();
        assert!(e.to_string().contains("one partition"), "{e}");
        max.tile_assignment_devices = vec![4];
        let e = check_spec(&mesh, &spec(&[]), 1, &max).unwrap_err();
        assert!(e.to_string().contains("partition 4, outside"), "{e}");
        // Manual and unreduced: each partition holds a value of its own; no spec fits.
        for kind in [ShardingType::Manual, ShardingType::Unreduced] {
            let mut own = tiled(&[], &[], false);
            own.kind = kind;
            for sp in [spec(&[]), spec(&[&["x"]])] {
                let e = check_spec(&mesh, &sp, 1, &own).unwrap_err();
                assert!(e.to_string().contains("a value of its own"), "{e}");
            }
        }
        // The same for a tiling whose trailing device group is manual.
        let mut partly = tiled(&[2, 2], &[0, 1, 2, 3], false);
        partly.last_tile_dims = vec![ShardingType::Manual];
        let e = check_spec(&mesh, &spec(&[&["x"]]), 1, &partly).unwrap_err();
        assert!(e.to_string().contains("a value of its own"), "{e}");
        let mut unknown = tiled(&[], &[], false);
        unknown.kind = ShardingType::Unknown;
        check_spec(&mesh, &spec(&[&["x"]]), 1, &unknown).unwrap();
        // A sharding over another number of partitions, or naming one twice.
        let e = check_spec(&mesh, &spec(&[&["x"]]), 1, &tiled(&[2], &[0, 1], false)).unwrap_err();
        assert!(e.to_string().contains("spans 2 partitions"), "{e}");
        let e = check_spec(
            &mesh,
            &spec(&[&["x"]]),
            1,
            &tiled(&[2, 2], &[0, 1, 1, 3], true),
        )
        .unwrap_err();
        assert!(e.to_string().contains("names partition 1 twice"), "{e}");
        let e = check_spec(
            &mesh,
            &spec(&[&["x"]]),
            1,
            &tiled(&[2, 2], &[0, 1, 2, 9], true),
        )
        .unwrap_err();
        assert!(e.to_string().contains("partition 9"), "{e}");
    }
}
