//! Compile options, encoded to XLA's `CompileOptionsProto` with prost.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::program::{uses_shardy, Program};

/// A value for `env_option_overrides` (XLA flags set for one compilation).
#[derive(Clone, Debug, PartialEq)]
pub enum OptionOverride {
    /// A string flag value.
    String(String),
    /// A boolean flag value.
    Bool(bool),
    /// An integer flag value.
    Int(i64),
    /// A floating-point flag value.
    Double(f64),
}

/// How to compile a program.
///
/// The defaults compile for one replica and one partition on the client's first device.
#[derive(Clone, Debug, PartialEq)]
pub struct CompileOptions {
    /// Number of replicas (data-parallel copies). At least 1.
    pub num_replicas: u32,
    /// Number of partitions (model-parallel shards). At least 1.
    pub num_partitions: u32,
    /// Partition with XLA's SPMD partitioner.
    pub use_spmd_partitioning: bool,
    /// Use the Shardy partitioner instead of GSPMD.
    pub use_shardy_partitioner: bool,
    /// Device ids, indexed `[replica][partition]`. `None` lets the plugin choose.
    pub device_assignment: Option<Vec<Vec<i64>>>,
    /// Device ordinal to compile for; -1 lets the plugin choose.
    pub device_ordinal: i64,
    /// The entry computation takes its parameters as one tuple.
    pub parameter_is_tupled_arguments: bool,
    /// Compile an executable that can run on any single device (`execute_on`).
    pub portable: bool,
    /// XLA option overrides for this compilation. Checked before compiling: names must
    /// look like XLA option names, integers must be in range (counts and sizes are not
    /// negative), doubles finite (see `CompileOptions::encode`).
    pub env_option_overrides: BTreeMap<String, OptionOverride>,
}

impl Default for CompileOptions {
    fn default() -> CompileOptions {
        CompileOptions {
            num_replicas: 1,
            num_partitions: 1,
            use_spmd_partitioning: false,
            use_shardy_partitioner: false,
            device_assignment: None,
            device_ordinal: -1,
            parameter_is_tupled_arguments: false,
            portable: false,
            env_option_overrides: BTreeMap::new(),
        }
    }
}

impl CompileOptions {
    /// Options for `num_replicas` x `num_partitions` devices, checked (each at least 1 and
    /// fitting in 32 bits), with SPMD partitioning on when there is more than one partition
    /// (what front ends mean by "partitions"). Change the fields afterwards to override.
    pub fn for_mesh(num_replicas: i64, num_partitions: i64) -> Result<CompileOptions> {
        let ok = |n: i64| (1..=i64::from(u32::MAX)).contains(&n);
        if !ok(num_replicas) || !ok(num_partitions) {
            return Err(Error::invalid(format!(
                "num_replicas and num_partitions must each be at least 1 and at most {} (got \
                 {num_replicas} and {num_partitions})",
                u32::MAX
            )));
        }
        Ok(CompileOptions {
            num_replicas: num_replicas as u32,
            num_partitions: num_partitions as u32,
            use_spmd_partitioning: num_partitions > 1,
            ..CompileOptions::default()
        })
    }

    /// Pins a single-device program to the device with id `device_id` (a one-entry device
    /// assignment). Refused when a device assignment is set already or the options are for
    /// more than one replica or partition.
    pub fn on_device(mut self, device_id: i64) -> Result<CompileOptions> {
        if self.device_assignment.is_some() {
            return Err(Error::invalid(
                "give either device or device_assignment, not both",
            ));
        }
        if self.num_replicas != 1 || self.num_partitions != 1 {
            return Err(Error::invalid(
                "device= is for single-device programs; use device_assignment",
            ));
        }
        self.device_assignment = Some(vec![vec![device_id]]);
        Ok(self)
    }
}

/// The XLA option rpjrt turns off on CPU compiles unless the caller sets it (see
/// [`CompileOptions::effective`]).
pub const CPU_FAST_MIN_MAX: &str = "xla_cpu_enable_fast_min_max";

impl CompileOptions {
    /// The options rpjrt actually compiles `program` with on a plugin whose platform is
    /// `platform` (what every compile path encodes, and so what the compile cache keys on):
    ///
    /// - a module in the Shardy dialect gets the Shardy partitioner
    ///   ([`options_for`]);
    /// - on `cpu`, [`CPU_FAST_MIN_MAX`] is `false` unless the caller set it. Both CPU plugins
    ///   default it to `true`, which makes `maximum`/`minimum` drop NaNs (`max(1, NaN) = 1`,
    ///   against StableHLO's semantics and what JAX computes: JAX compiles with it off). Off,
    ///   the plugins also build the same executables JAX does (smaller, and quicker to load
    ///   from the compile cache: 388 KB instead of 419 KB for bench/'s 12-layer transformer).
    pub fn effective<'a>(
        &'a self,
        program: &Program,
        platform: &str,
    ) -> std::borrow::Cow<'a, CompileOptions> {
        use std::borrow::Cow;
        let mut o = match options_for(program, self) {
            Some(adjusted) => Cow::Owned(adjusted),
            None => Cow::Borrowed(self),
        };
        if platform == "cpu" && !o.env_option_overrides.contains_key(CPU_FAST_MIN_MAX) {
            o.to_mut()
                .env_option_overrides
                .insert(CPU_FAST_MIN_MAX.to_string(), OptionOverride::Bool(false));
        }
        o
    }
}

/// The options to compile `program` with: `options`, with the Shardy partitioner switched
/// on (and SPMD partitioning, when there is more than one partition) if the module uses the
/// `sdy` dialect. GSPMD cannot read Shardy's shardings, so this is never a choice between
/// two working set-ups.
pub fn options_for(program: &Program, options: &CompileOptions) -> Option<CompileOptions> {
    if options.use_shardy_partitioner || !uses_shardy(program) {
        return None;
    }
    let mut o = options.clone();
    o.use_shardy_partitioner = true;
    if o.num_partitions > 1 {
        o.use_spmd_partitioning = true;
    }
    Some(o)
}

mod proto {
    //! The subset of XLA's protos rpjrt writes, declared with prost's derive.

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct CompileOptionsProto {
        #[prost(bool, tag = "2")]
        pub parameter_is_tupled_arguments: bool,
        #[prost(message, optional, tag = "3")]
        pub executable_build_options: Option<ExecutableBuildOptionsProto>,
        #[prost(bool, tag = "4")]
        pub compile_portable_executable: bool,
        #[prost(btree_map = "string, message", tag = "7")]
        pub env_option_overrides: std::collections::BTreeMap<String, OptionOverrideProto>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ExecutableBuildOptionsProto {
        #[prost(int64, tag = "1")]
        pub device_ordinal: i64,
        #[prost(int64, tag = "4")]
        pub num_replicas: i64,
        #[prost(int64, tag = "5")]
        pub num_partitions: i64,
        #[prost(bool, tag = "6")]
        pub use_spmd_partitioning: bool,
        #[prost(message, optional, tag = "9")]
        pub device_assignment: Option<DeviceAssignmentProto>,
        #[prost(bool, tag = "19")]
        pub use_shardy_partitioner: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct DeviceAssignmentProto {
        #[prost(int32, tag = "1")]
        pub replica_count: i32,
        #[prost(int32, tag = "2")]
        pub computation_count: i32,
        #[prost(message, repeated, tag = "3")]
        pub computation_devices: Vec<ComputationDevice>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ComputationDevice {
        #[prost(int64, repeated, tag = "1")]
        pub replica_device_ids: Vec<i64>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct OptionOverrideProto {
        #[prost(oneof = "Override", tags = "1, 2, 3, 4")]
        pub value: Option<Override>,
    }

    #[derive(Clone, PartialEq, prost::Oneof)]
    #[allow(clippy::enum_variant_names)]
    pub enum Override {
        #[prost(string, tag = "1")]
        StringField(String),
        #[prost(bool, tag = "2")]
        BoolField(bool),
        #[prost(int64, tag = "3")]
        IntField(i64),
        #[prost(double, tag = "4")]
        DoubleField(f64),
    }
}

impl CompileOptions {
    /// Checks the options against the client's device ids and encodes them.
    ///
    /// Refuses zero replicas or partitions, a `device_ordinal` below -1 or naming no device,
    /// an assignment whose shape does not match the replica and partition counts, and
    /// unknown or repeated device ids: the plugins abort the process on some of these
    /// instead of returning an error. Every path that hands options to a plugin encodes
    /// them here: compiles, and the overrides of `Client::load`.
    pub fn encode(&self, device_ids: &[i64]) -> Result<Vec<u8>> {
        use prost::Message;
        if self.num_replicas == 0 {
            return Err(Error::invalid("num_replicas must be at least 1"));
        }
        if self.num_partitions == 0 {
            return Err(Error::invalid("num_partitions must be at least 1"));
        }
        let needed = self.num_replicas as usize * self.num_partitions as usize;
        if self.device_assignment.is_none() && needed > device_ids.len() {
            return Err(Error::invalid(format!(
                "{} replicas x {} partitions need {needed} devices, but the client has {}",
                self.num_replicas,
                self.num_partitions,
                device_ids.len()
            )));
        }
        if self.device_ordinal < -1 {
            return Err(Error::invalid(format!(
                "device_ordinal {} is out of range: it is -1 (the plugin chooses) or a device \
                 of this client (devices: {device_ids:?})",
                self.device_ordinal
            )));
        }
        if self.device_ordinal >= 0 && !device_ids.contains(&self.device_ordinal) {
            return Err(Error::invalid(format!(
                "device_ordinal {} is not a device of this client (devices: {device_ids:?})",
                self.device_ordinal
            )));
        }
        let device_assignment = match &self.device_assignment {
            None => None,
            Some(rows) => Some(self.encode_assignment(rows, device_ids)?),
        };
        for (name, value) in &self.env_option_overrides {
            check_override(name, value)?;
        }
        let overrides = self
            .env_option_overrides
            .iter()
            .map(|(k, v)| {
                let value = match v {
                    OptionOverride::String(s) => proto::Override::StringField(s.clone()),
                    OptionOverride::Bool(b) => proto::Override::BoolField(*b),
                    OptionOverride::Int(i) => proto::Override::IntField(*i),
                    OptionOverride::Double(d) => proto::Override::DoubleField(*d),
                };
                (k.clone(), proto::OptionOverrideProto { value: Some(value) })
            })
            .collect();
        let p = proto::CompileOptionsProto {
            parameter_is_tupled_arguments: self.parameter_is_tupled_arguments,
            executable_build_options: Some(proto::ExecutableBuildOptionsProto {
                device_ordinal: self.device_ordinal,
                num_replicas: self.num_replicas.into(),
                num_partitions: self.num_partitions.into(),
                use_spmd_partitioning: self.use_spmd_partitioning,
                device_assignment,
                use_shardy_partitioner: self.use_shardy_partitioner,
            }),
            compile_portable_executable: self.portable,
            env_option_overrides: overrides,
        };
        Ok(p.encode_to_vec())
    }

    fn encode_assignment(
        &self,
        rows: &[Vec<i64>],
        device_ids: &[i64],
    ) -> Result<proto::DeviceAssignmentProto> {
        if rows.len() != self.num_replicas as usize {
            return Err(Error::invalid(format!(
                "device_assignment has {} rows but num_replicas is {}",
                rows.len(),
                self.num_replicas
            )));
        }
        let mut seen = std::collections::HashSet::new();
        for (r, row) in rows.iter().enumerate() {
            if row.len() != self.num_partitions as usize {
                return Err(Error::invalid(format!(
                    "device_assignment row {r} has {} entries but num_partitions is {}",
                    row.len(),
                    self.num_partitions
                )));
            }
            for &id in row {
                if !device_ids.contains(&id) {
                    return Err(Error::invalid(format!(
                        "device_assignment names device {id}, which this client does not have \
                         (devices: {device_ids:?})"
                    )));
                }
                if !seen.insert(id) {
                    return Err(Error::invalid(format!(
                        "device_assignment names device {id} more than once"
                    )));
                }
            }
        }
        // The proto is column-major: one entry per partition, listing a device per replica.
        let computation_devices = (0..self.num_partitions as usize)
            .map(|p| proto::ComputationDevice {
                replica_device_ids: rows.iter().map(|row| row[p]).collect(),
            })
            .collect();
        Ok(proto::DeviceAssignmentProto {
            replica_count: self.num_replicas as i32,
            computation_count: self.num_partitions as i32,
            computation_devices,
        })
    }
}

/// The replica and partition counts of encoded compile options (`None` when they do not
/// decode or name none).
pub(crate) fn mesh_counts(encoded: &[u8]) -> Option<(i64, i64)> {
    use prost::Message;
    let b = proto::CompileOptionsProto::decode(encoded)
        .ok()?
        .executable_build_options?;
    Some((b.num_replicas.max(1), b.num_partitions.max(1)))
}

/// The device assignment of encoded compile options, as [`CompileOptions::device_assignment`]
/// rows (one per replica, one id per partition); `None` when they name none.
pub(crate) fn recorded_assignment(encoded: &[u8]) -> Option<Vec<Vec<i64>>> {
    use prost::Message;
    let a = proto::CompileOptionsProto::decode(encoded)
        .ok()?
        .executable_build_options?
        .device_assignment?;
    let replicas = usize::try_from(a.replica_count).ok().filter(|&r| r > 0)?;
    let cols = &a.computation_devices;
    let rows = (0..replicas).map(|r| {
        cols.iter()
            .map(|c| c.replica_device_ids.get(r).copied())
            .collect()
    });
    rows.collect::<Option<Vec<Vec<i64>>>>()
        .filter(|rows| rows.iter().all(|r| !r.is_empty()))
}

/// Whether encoded compile options ask for `parameter_is_tupled_arguments`.
pub(crate) fn tupled_arguments(encoded: &[u8]) -> bool {
    use prost::Message;
    proto::CompileOptionsProto::decode(encoded).is_ok_and(|p| p.parameter_is_tupled_arguments)
}

/// XLA options whose integer values are counts (at least 1). The CPU plugins throw a C++
/// exception (which aborts the process) on a negative split count, for example.
const COUNT_OPTIONS: &[&str] = &[
    "xla_cpu_parallel_codegen_split_count",
    "xla_force_host_platform_device_count",
];

/// The largest count accepted (known counts and options named `*_count`, `*_threads`): the
/// CPU plugins allocate per unit of a split count before checking it (2^31 - 1 exhausts
/// memory), and no machine needs more than this many threads or pieces.
const MAX_COUNT_OVERRIDE: i64 = 65536;

/// The largest integer accepted for an XLA option. XLA's integer options are 32- or
/// 64-bit fields used as counts, sizes and levels; anything beyond this is a mistake, and
/// some plugins allocate or loop by such values before checking them.
const MAX_INT_OVERRIDE: i64 = i32::MAX as i64;

/// Checks one `env_option_overrides` entry before the plugin sees it.
///
/// Names must look like XLA option names (`xla_` then lower-case letters, digits and
/// underscores). Integers must be in `-1 ..= i32::MAX` (-1 is XLA's usual "unset");
/// options that are sizes (names ending in `_size`, `_bytes` or `_limit`) at least 0, and
/// counts (known ones, and names ending in `_count` or `_threads`) from 0 (known ones
/// from 1) to 65536.
/// Doubles must be finite; strings must not contain NUL.
fn check_override(name: &str, value: &OptionOverride) -> Result<()> {
    let well_formed = name.starts_with("xla_")
        && name.len() > 4
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !well_formed {
        return Err(Error::invalid(format!(
            "env_option_overrides: {name:?} is not an XLA option name (they look like \
             xla_cpu_enable_fast_math: xla_ then lower-case letters, digits and underscores)"
        )));
    }
    match value {
        OptionOverride::Int(v) => {
            let ends = |ss: &[&str]| ss.iter().any(|s| name.ends_with(s));
            let counted = ends(&["_count", "_threads"]);
            let sized = counted || ends(&["_size", "_bytes", "_limit"]);
            let (min, max) = if COUNT_OPTIONS.contains(&name) {
                (1, MAX_COUNT_OVERRIDE)
            } else if counted {
                (0, MAX_COUNT_OVERRIDE)
            } else if sized {
                (0, MAX_INT_OVERRIDE)
            } else {
                (-1, MAX_INT_OVERRIDE)
            };
            if *v < min || *v > max {
                return Err(Error::invalid(format!(
                    "env_option_overrides: {name} = {v} is out of range (this option takes \
                     integers from {min} to {max})"
                )));
            }
        }
        OptionOverride::Double(d) if !d.is_finite() => {
            return Err(Error::invalid(format!(
                "env_option_overrides: {name} = {d} is not a finite number"
            )));
        }
        OptionOverride::String(s) if s.contains('\0') => {
            return Err(Error::invalid(format!(
                "env_option_overrides: the value of {name} contains a NUL character"
            )));
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn cpu_compiles_keep_nans_in_min_max_unless_told() {
        let prog = Program::mlir(b"func.func @main() { return }".to_vec());
        let d = CompileOptions::default();
        let cpu = d.effective(&prog, "cpu");
        assert_eq!(
            cpu.env_option_overrides.get(CPU_FAST_MIN_MAX),
            Some(&OptionOverride::Bool(false))
        );
        assert!(matches!(
            d.effective(&prog, "cuda"),
            std::borrow::Cow::Borrowed(_)
        ));
        let mut mine = CompileOptions::default();
        mine.env_option_overrides
            .insert(CPU_FAST_MIN_MAX.into(), OptionOverride::Bool(true));
        assert_eq!(*mine.effective(&prog, "cpu"), mine);
    }

    #[test]
    fn default_options_have_one_replica_and_partition() {
        let bytes = CompileOptions::default().encode(&[0, 1]).unwrap();
        let p = proto::CompileOptionsProto::decode(bytes.as_slice()).unwrap();
        let b = p.executable_build_options.unwrap();
        assert_eq!(
            (b.num_replicas, b.num_partitions, b.device_ordinal),
            (1, 1, -1)
        );
        assert!(!bytes.is_empty());
    }

    #[test]
    fn invalid_options_are_refused() {
        let zero = CompileOptions {
            num_replicas: 0,
            ..Default::default()
        };
        assert!(zero
            .encode(&[0])
            .unwrap_err()
            .to_string()
            .contains("num_replicas"));
        let dup = CompileOptions {
            num_replicas: 2,
            device_assignment: Some(vec![vec![0], vec![0]]),
            ..Default::default()
        };
        assert!(dup
            .encode(&[0, 1])
            .unwrap_err()
            .to_string()
            .contains("more than once"));
        let unknown = CompileOptions {
            device_assignment: Some(vec![vec![7]]),
            ..Default::default()
        };
        assert!(unknown
            .encode(&[0, 1])
            .unwrap_err()
            .to_string()
            .contains("device 7"));
        let too_many = CompileOptions {
            num_replicas: 3,
            ..Default::default()
        };
        assert!(too_many.encode(&[0, 1]).is_err());
        for bad in [-2, i64::MIN, 5] {
            let o = CompileOptions {
                device_ordinal: bad,
                ..Default::default()
            };
            let e = o.encode(&[0, 1]).unwrap_err().to_string();
            assert!(e.contains(&format!("device_ordinal {bad}")), "{e}");
        }
        for good in [-1, 0, 1] {
            let o = CompileOptions {
                device_ordinal: good,
                ..Default::default()
            };
            assert!(o.encode(&[0, 1]).is_ok(), "{good}");
        }
    }

    /// The rule `encode` enforces, written independently: what it accepts is exactly this.
    fn valid(o: &CompileOptions, ids: &[i64]) -> bool {
        let (r, p) = (o.num_replicas as usize, o.num_partitions as usize);
        let ordinal = o.device_ordinal == -1 || ids.contains(&o.device_ordinal);
        let assignment = match &o.device_assignment {
            None => r * p <= ids.len(),
            Some(rows) => {
                let flat: Vec<i64> = rows.iter().flatten().copied().collect();
                let unique: std::collections::HashSet<_> = flat.iter().collect();
                rows.len() == r
                    && rows.iter().all(|row| row.len() == p)
                    && flat.iter().all(|d| ids.contains(d))
                    && unique.len() == flat.len()
            }
        };
        r >= 1 && p >= 1 && ordinal && assignment
    }

    proptest::proptest! {
        #[test]
        fn encode_accepts_exactly_the_valid_options(
            replicas in 0u32..4,
            partitions in 0u32..4,
            ordinal in -3i64..5,
            rows in proptest::option::of(proptest::collection::vec(
                proptest::collection::vec(-1i64..5, 0..4), 0..4)),
            devices in 1i64..5,
        ) {
            let ids: Vec<i64> = (0..devices).collect();
            let o = CompileOptions {
                num_replicas: replicas,
                num_partitions: partitions,
                device_ordinal: ordinal,
                device_assignment: rows,
                ..Default::default()
            };
            let got = o.encode(&ids);
            proptest::prop_assert_eq!(got.is_ok(), valid(&o, &ids), "{:?}: {:?}", o, got);
        }
    }

    #[test]
    fn overrides_are_checked() {
        let with = |name: &str, v: OptionOverride| CompileOptions {
            env_option_overrides: [(name.to_string(), v)].into_iter().collect(),
            ..Default::default()
        };
        let refused =
            |name: &str, v: OptionOverride| with(name, v).encode(&[0]).unwrap_err().to_string();
        let split = "xla_cpu_parallel_codegen_split_count";
        assert!(refused(split, OptionOverride::Int(-1)).contains("out of range"));
        assert!(refused(split, OptionOverride::Int(0)).contains("from 1"));
        assert!(refused(split, OptionOverride::Int(1 << 40)).contains("out of range"));
        assert!(refused(split, OptionOverride::Int(65537)).contains("to 65536"));
        assert!(refused("xla_some_thing_count", OptionOverride::Int(1 << 20)).contains("65536"));
        assert!(with(split, OptionOverride::Int(4)).encode(&[0]).is_ok());
        assert!(refused("xla_some_buffer_size", OptionOverride::Int(-1)).contains("from 0"));
        assert!(with("xla_dump_max_hlo_modules", OptionOverride::Int(-1))
            .encode(&[0])
            .is_ok());
        assert!(refused("xla_x", OptionOverride::Int(-2)).contains("out of range"));
        assert!(refused("not_xla", OptionOverride::Bool(true)).contains("not an XLA option"));
        assert!(refused("xla_A", OptionOverride::Bool(true)).contains("not an XLA option"));
        assert!(refused("xla_x", OptionOverride::Double(f64::NAN)).contains("finite"));
        assert!(refused("xla_x", OptionOverride::String("a\0b".into())).contains("NUL"));
    }

    #[test]
    fn overrides_encode_to_the_same_bytes_every_time() {
        // A HashMap in the proto encoded them in its per-map random order: one set of
        // options had up to (k+1)! encodings, and as many cache keys.
        let names = ["xla_b", "xla_a", "xla_d", "xla_c", "xla_f", "xla_e"];
        let encode = || {
            let mut o = CompileOptions::default();
            for (i, n) in names.iter().enumerate() {
                o.env_option_overrides
                    .insert(n.to_string(), OptionOverride::Int(i as i64));
            }
            o.encode(&[0]).unwrap()
        };
        let first = encode();
        for _ in 0..32 {
            assert_eq!(encode(), first, "one set of overrides, one byte string");
        }
        let p = proto::CompileOptionsProto::decode(first.as_slice()).unwrap();
        let keys: Vec<_> = p.env_option_overrides.keys().cloned().collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        // Sorted on the wire too: each name appears after the one before it.
        let at = |n: &str| {
            first
                .windows(n.len())
                .position(|w| w == n.as_bytes())
                .unwrap()
        };
        assert!(sorted.windows(2).all(|w| at(&w[0]) < at(&w[1])));
    }

    #[test]
    fn tupled_arguments_are_read_back() {
        let o = CompileOptions {
            parameter_is_tupled_arguments: true,
            ..Default::default()
        };
        assert!(tupled_arguments(&o.encode(&[0]).unwrap()));
        assert!(!tupled_arguments(
            &CompileOptions::default().encode(&[0]).unwrap()
        ));
    }

    #[test]
    fn assignment_is_encoded_per_partition() {
        let o = CompileOptions {
            num_replicas: 2,
            num_partitions: 2,
            device_assignment: Some(vec![vec![0, 1], vec![2, 3]]),
            ..Default::default()
        };
        let p = proto::CompileOptionsProto::decode(o.encode(&[0, 1, 2, 3]).unwrap().as_slice())
            .unwrap();
        let da = p
            .executable_build_options
            .unwrap()
            .device_assignment
            .unwrap();
        assert_eq!(da.computation_devices[0].replica_device_ids, vec![0, 2]);
        assert_eq!(da.computation_devices[1].replica_device_ids, vec![1, 3]);
    }
}
