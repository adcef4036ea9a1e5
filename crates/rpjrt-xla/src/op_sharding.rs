//! XLA's `OpSharding`, decoded from the bytes the Shardings extension hands out.
//!
//! [`OpSharding::decode`] reads the serialized proto (with prost, as the rest of rpjrt reads
//! XLA's protos), then checks that it describes a sharding XLA could have made: a known type,
//! a tile assignment whose device count matches its dimensions (listed devices or an iota
//! with a valid transpose), at most one entry for a maximal sharding. Anything else is an
//! [`Error::InvalidArgument`] naming what was wrong; decoding never panics.
//!
//! `Display` writes XLA's short form: `{replicated}`, `{maximal device=0}`,
//! `{devices=[2,1]<=[2]}`, `{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}`,
//! `{{replicated}, {devices=[2]<=[2]}}` for a tuple.

use std::fmt;

use prost::Message;

use crate::{Error, Result};

/// Most devices a decoded tile assignment may name (an iota expands to this many at most);
/// far beyond any real mesh, it keeps a crafted proto from asking for gigabytes.
const MAX_TILE_DEVICES: i64 = 1 << 24;

mod proto {
    //! `xla.OpSharding`: the fields rpjrt reads (metadata, tile_shape are skipped).

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct OpSharding {
        #[prost(int32, tag = "1")]
        pub r#type: i32,
        #[prost(int64, repeated, tag = "3")]
        pub tile_assignment_dimensions: Vec<i64>,
        #[prost(int64, repeated, tag = "4")]
        pub tile_assignment_devices: Vec<i64>,
        #[prost(message, repeated, tag = "5")]
        pub tuple_shardings: Vec<OpSharding>,
        #[prost(bool, tag = "6")]
        pub replicate_on_last_tile_dim: bool,
        #[prost(int32, repeated, tag = "8")]
        pub last_tile_dims: Vec<i32>,
        #[prost(int64, repeated, tag = "9")]
        pub iota_reshape_dims: Vec<i64>,
        #[prost(int32, repeated, tag = "10")]
        pub iota_transpose_perm: Vec<i32>,
        #[prost(bool, tag = "11")]
        pub is_shard_group: bool,
        #[prost(int64, tag = "12")]
        pub shard_group_id: i64,
        #[prost(int32, tag = "13")]
        pub shard_group_type: i32,
    }
}

/// The kind of an [`OpSharding`] (XLA's `OpSharding.Type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShardingType {
    /// Every device holds the whole value.
    Replicated,
    /// One device holds the whole value.
    Maximal,
    /// A tuple value: one sharding per element.
    Tuple,
    /// Tiled over devices (`tile_assignment_*`).
    Other,
    /// Partitioned by the program itself (manual SPMD).
    Manual,
    /// Not decided yet (a partitioner placeholder).
    Unknown,
    /// Each device holds a partial value still to be reduced.
    Unreduced,
}

impl ShardingType {
    fn from_code(code: i32) -> Option<ShardingType> {
        Some(match code {
            0 => ShardingType::Replicated,
            1 => ShardingType::Maximal,
            2 => ShardingType::Tuple,
            3 => ShardingType::Other,
            4 => ShardingType::Manual,
            5 => ShardingType::Unknown,
            6 => ShardingType::Unreduced,
            _ => return None,
        })
    }

    /// XLA's lower-case name: `replicated`, `maximal`, `tuple`, `other`, `manual`,
    /// `unknown`, `unreduced`.
    pub fn name(self) -> &'static str {
        match self {
            ShardingType::Replicated => "replicated",
            ShardingType::Maximal => "maximal",
            ShardingType::Tuple => "tuple",
            ShardingType::Other => "other",
            ShardingType::Manual => "manual",
            ShardingType::Unknown => "unknown",
            ShardingType::Unreduced => "unreduced",
        }
    }
}

impl fmt::Display for ShardingType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A shard group (`shard_as N` / `shard_like N`): values whose shardings the partitioner
/// keeps equal, or makes alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ShardGroup {
    /// The group's id.
    pub id: i64,
    /// `true` for `shard_like`, `false` for `shard_as`.
    pub like: bool,
}

/// How one value (a parameter or output) is split over devices: XLA's `OpSharding`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OpSharding {
    /// The kind of sharding.
    pub kind: ShardingType,
    /// The shape of the device grid the value is tiled over (`Other`, and the single
    /// entry of `Maximal`); with `replicate_on_last_tile_dim` or `last_tile_dims`, the
    /// trailing dimensions are groups of devices, not value dimensions.
    pub tile_assignment_dimensions: Vec<i64>,
    /// The devices of the grid, row-major, when listed explicitly (empty for an iota).
    pub tile_assignment_devices: Vec<i64>,
    /// Iota form: the devices are `0..n` reshaped to these dimensions, transposed by
    /// `iota_transpose_perm`, then reshaped to `tile_assignment_dimensions`.
    pub iota_reshape_dims: Vec<i64>,
    /// Iota form: the transpose (empty means none).
    pub iota_transpose_perm: Vec<i64>,
    /// The last tile dimension replicates the value over its devices.
    pub replicate_on_last_tile_dim: bool,
    /// The kinds of the trailing tile dimensions that are device groups (replicated,
    /// manual, ...).
    pub last_tile_dims: Vec<ShardingType>,
    /// Element shardings of a `Tuple`.
    pub tuple_shardings: Vec<OpSharding>,
    /// The shard group, if any.
    pub shard_group: Option<ShardGroup>,
}

fn bad(why: impl fmt::Display) -> Error {
    Error::invalid(format!("not a valid serialized OpSharding: {why}"))
}

fn product(dims: &[i64], what: &str) -> Result<i64> {
    let mut n: i64 = 1;
    for &d in dims {
        if d < 0 {
            return Err(bad(format!("{what} has a negative dimension ({dims:?})")));
        }
        n = n
            .checked_mul(d)
            .filter(|n| *n <= MAX_TILE_DEVICES)
            .ok_or_else(|| {
                bad(format!(
                    "{what} {dims:?} names more than {MAX_TILE_DEVICES} devices"
                ))
            })?;
    }
    Ok(n)
}

impl OpSharding {
    /// Decodes and checks a serialized `OpSharding`. Truncated, garbled or inconsistent
    /// bytes are an [`Error::InvalidArgument`] that says what was wrong.
    pub fn decode(bytes: &[u8]) -> Result<OpSharding> {
        let p = proto::OpSharding::decode(bytes).map_err(bad)?;
        OpSharding::from_proto(p)
    }

    fn from_proto(p: proto::OpSharding) -> Result<OpSharding> {
        let kind = ShardingType::from_code(p.r#type)
            .ok_or_else(|| bad(format!("unknown sharding type {}", p.r#type)))?;
        let last_tile_dims = p
            .last_tile_dims
            .iter()
            .map(|&c| {
                ShardingType::from_code(c)
                    .ok_or_else(|| bad(format!("unknown type {c} in last_tile_dims")))
            })
            .collect::<Result<Vec<_>>>()?;
        let shard_group = if p.is_shard_group {
            let like = match p.shard_group_type {
                0 => false,
                1 => true,
                t => return Err(bad(format!("unknown shard group type {t}"))),
            };
            Some(ShardGroup {
                id: p.shard_group_id,
                like,
            })
        } else {
            None
        };
        let tuple_shardings = p
            .tuple_shardings
            .into_iter()
            .map(OpSharding::from_proto)
            .collect::<Result<Vec<_>>>()?;
        if kind != ShardingType::Tuple && !tuple_shardings.is_empty() {
            return Err(bad(format!(
                "a {kind} sharding has {} tuple element shardings",
                tuple_shardings.len()
            )));
        }
        let s = OpSharding {
            kind,
            tile_assignment_dimensions: p.tile_assignment_dimensions,
            tile_assignment_devices: p.tile_assignment_devices,
            iota_reshape_dims: p.iota_reshape_dims,
            iota_transpose_perm: p.iota_transpose_perm.into_iter().map(i64::from).collect(),
            replicate_on_last_tile_dim: p.replicate_on_last_tile_dim,
            last_tile_dims,
            tuple_shardings,
            shard_group,
        };
        s.check_tiles()?;
        Ok(s)
    }

    fn check_tiles(&self) -> Result<()> {
        match self.kind {
            ShardingType::Other => {
                if self.tile_assignment_dimensions.is_empty() {
                    return Err(bad("a tiled sharding without tile_assignment_dimensions"));
                }
                let n = product(
                    &self.tile_assignment_dimensions,
                    "tile_assignment_dimensions",
                )?;
                let listed = self.device_count_listed()?;
                if listed != n {
                    return Err(bad(format!(
                        "tile_assignment_dimensions {:?} need {n} devices but the assignment \
                         has {listed}",
                        self.tile_assignment_dimensions
                    )));
                }
                let trailing =
                    usize::from(self.replicate_on_last_tile_dim) + self.last_tile_dims.len();
                if trailing > self.tile_assignment_dimensions.len() {
                    return Err(bad(format!(
                        "{trailing} trailing device-group dimensions but only {} tile \
                         dimensions",
                        self.tile_assignment_dimensions.len()
                    )));
                }
            }
            ShardingType::Maximal => {
                let listed = self.device_count_listed()?;
                if listed != 1 {
                    return Err(bad(format!(
                        "a maximal sharding names {listed} devices instead of one"
                    )));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// How many devices the listed or iota assignment names (checked for consistency).
    fn device_count_listed(&self) -> Result<i64> {
        if self.iota_reshape_dims.is_empty() {
            if !self.iota_transpose_perm.is_empty() {
                return Err(bad("iota_transpose_perm without iota_reshape_dims"));
            }
            return Ok(self.tile_assignment_devices.len() as i64);
        }
        if !self.tile_assignment_devices.is_empty() {
            return Err(bad(
                "both tile_assignment_devices and iota_reshape_dims are set",
            ));
        }
        let perm = &self.iota_transpose_perm;
        if !perm.is_empty() {
            let mut seen = vec![false; self.iota_reshape_dims.len()];
            for &p in perm {
                match usize::try_from(p).ok().and_then(|i| seen.get_mut(i)) {
                    Some(s) if !*s => *s = true,
                    _ => {
                        return Err(bad(format!(
                            "iota_transpose_perm {perm:?} is not a permutation of {} \
                             dimensions",
                            self.iota_reshape_dims.len()
                        )))
                    }
                }
            }
            if perm.len() != self.iota_reshape_dims.len() {
                return Err(bad(format!(
                    "iota_transpose_perm {perm:?} is not a permutation of {} dimensions",
                    self.iota_reshape_dims.len()
                )));
            }
        }
        product(&self.iota_reshape_dims, "iota_reshape_dims")
    }

    /// `true` for a replicated sharding (also a tuple whose elements all are).
    pub fn is_replicated(&self) -> bool {
        match self.kind {
            ShardingType::Replicated => true,
            ShardingType::Tuple => self.tuple_shardings.iter().all(|t| t.is_replicated()),
            _ => false,
        }
    }

    /// The device ids of the tile assignment in row-major order of
    /// `tile_assignment_dimensions`, with an iota expanded. Empty for replicated, manual,
    /// unknown, unreduced and tuple shardings, and for an iota [`OpSharding::decode`] would
    /// refuse.
    pub fn devices(&self) -> Vec<i64> {
        if self.iota_reshape_dims.is_empty() {
            return self.tile_assignment_devices.clone();
        }
        // The fields are public: an iota built by hand is checked as a decoded one is
        // (a permutation out of range, a product past the bound), else it names nothing.
        if self.device_count_listed().is_err() {
            return Vec::new();
        }
        // Iota: element at multi-index j of the transposed array is the source element at
        // the index with j placed back by the permutation.
        let dims = &self.iota_reshape_dims;
        let n: i64 = dims.iter().product();
        let rank = dims.len();
        let perm: Vec<usize> = if self.iota_transpose_perm.is_empty() {
            (0..rank).collect()
        } else {
            self.iota_transpose_perm
                .iter()
                .map(|&p| p as usize)
                .collect()
        };
        let tdims: Vec<i64> = perm.iter().map(|&p| dims[p]).collect();
        let mut strides = vec![1i64; rank];
        for i in (0..rank.saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * dims[i + 1];
        }
        let mut out = Vec::with_capacity(n.max(0) as usize);
        let mut idx = vec![0i64; rank];
        for _ in 0..n {
            out.push(idx.iter().zip(&perm).map(|(&i, &p)| i * strides[p]).sum());
            for k in (0..rank).rev() {
                idx[k] += 1;
                if idx[k] < tdims[k] {
                    break;
                }
                idx[k] = 0;
            }
        }
        out
    }
}

fn join(v: &[i64]) -> String {
    v.iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

impl fmt::Display for OpSharding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = |f: &mut fmt::Formatter<'_>| match self.shard_group {
            Some(g) => write!(
                f,
                " {} {}",
                if g.like { "shard_like" } else { "shard_as" },
                g.id
            ),
            None => Ok(()),
        };
        match self.kind {
            ShardingType::Tuple => {
                f.write_str("{")?;
                for (i, t) in self.tuple_shardings.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str("}")
            }
            ShardingType::Replicated
            | ShardingType::Manual
            | ShardingType::Unknown
            | ShardingType::Unreduced => {
                write!(f, "{{{}", self.kind)?;
                group(f)?;
                f.write_str("}")
            }
            ShardingType::Maximal => {
                write!(
                    f,
                    "{{maximal device={}",
                    self.devices().first().unwrap_or(&0)
                )?;
                group(f)?;
                f.write_str("}")
            }
            ShardingType::Other => {
                write!(f, "{{devices=[{}]", join(&self.tile_assignment_dimensions))?;
                if self.iota_reshape_dims.is_empty() {
                    f.write_str(&join(&self.tile_assignment_devices))?;
                } else {
                    write!(f, "<=[{}]", join(&self.iota_reshape_dims))?;
                    let identity = self
                        .iota_transpose_perm
                        .iter()
                        .enumerate()
                        .all(|(i, &p)| p == i as i64);
                    if !identity {
                        write!(f, "T({})", join(&self.iota_transpose_perm))?;
                    }
                }
                if self.replicate_on_last_tile_dim {
                    f.write_str(" last_tile_dim_replicate")?;
                }
                if !self.last_tile_dims.is_empty() {
                    let names: Vec<&str> = self.last_tile_dims.iter().map(|t| t.name()).collect();
                    write!(f, " last_tile_dims={{{}}}", names.join(", "))?;
                }
                group(f)?;
                f.write_str("}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(p: &proto::OpSharding) -> Vec<u8> {
        p.encode_to_vec()
    }

    fn tiled(dims: &[i64]) -> proto::OpSharding {
        proto::OpSharding {
            r#type: 3,
            tile_assignment_dimensions: dims.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn short_forms() {
        let rep = OpSharding::decode(&[]).unwrap();
        assert_eq!(rep.kind, ShardingType::Replicated);
        assert_eq!(rep.to_string(), "{replicated}");
        assert!(rep.is_replicated());

        let max = OpSharding::decode(&enc(&proto::OpSharding {
            r#type: 1,
            tile_assignment_dimensions: vec![1],
            tile_assignment_devices: vec![3],
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(max.to_string(), "{maximal device=3}");

        let mut iota = tiled(&[2, 1]);
        iota.iota_reshape_dims = vec![2];
        let s = OpSharding::decode(&enc(&iota)).unwrap();
        assert_eq!(s.to_string(), "{devices=[2,1]<=[2]}");
        assert_eq!(s.devices(), vec![0, 1]);

        let mut tr = tiled(&[2, 2]);
        tr.iota_reshape_dims = vec![2, 2];
        tr.iota_transpose_perm = vec![1, 0];
        let s = OpSharding::decode(&enc(&tr)).unwrap();
        assert_eq!(s.to_string(), "{devices=[2,2]<=[2,2]T(1,0)}");
        assert_eq!(s.devices(), vec![0, 2, 1, 3]);

        let mut listed = tiled(&[2, 1, 2]);
        listed.tile_assignment_devices = vec![0, 1, 2, 3];
        listed.replicate_on_last_tile_dim = true;
        let s = OpSharding::decode(&enc(&listed)).unwrap();
        assert_eq!(
            s.to_string(),
            "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"
        );

        let mut manual = tiled(&[2, 2]);
        manual.iota_reshape_dims = vec![4];
        manual.last_tile_dims = vec![4];
        manual.is_shard_group = true;
        manual.shard_group_id = 7;
        manual.shard_group_type = 1;
        let s = OpSharding::decode(&enc(&manual)).unwrap();
        assert_eq!(
            s.to_string(),
            "{devices=[2,2]<=[4] last_tile_dims={manual} shard_like 7}"
        );

        let tuple = proto::OpSharding {
            r#type: 2,
            tuple_shardings: vec![proto::OpSharding::default(), iota.clone()],
            ..Default::default()
        };
        let s = OpSharding::decode(&enc(&tuple)).unwrap();
        assert_eq!(s.to_string(), "{{replicated}, {devices=[2,1]<=[2]}}");
        assert!(!s.is_replicated());
        assert_eq!(s.tuple_shardings.len(), 2);
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn bytes_written_by_xla_read_back_in_its_short_form() {
        // Serialized by jaxlib 0.10.2's OpSharding / HloSharding.to_proto() (the text is
        // what its HloSharding prints for the same value).
        for (bytes, text) in [
            ("08031a0202024a0104520100", "{devices=[2,2]<=[4]}"),
            (
                "08031a0202024a02020252020100",
                "{devices=[2,2]<=[2,2]T(1,0)}",
            ),
            (
                "08022a002a0b08031a01024a0102520100",
                "{{replicated}, {devices=[2]<=[2]}}",
            ),
        ] {
            let s = OpSharding::decode(&hex(bytes)).unwrap();
            assert_eq!(s.to_string(), text);
        }
    }

    #[test]
    fn bad_bytes_are_errors_not_panics() {
        let mut iota = tiled(&[2, 1]);
        iota.iota_reshape_dims = vec![2];
        let good = enc(&iota);
        for cut in 1..good.len() {
            // Every strict prefix either fails cleanly or decodes to something consistent.
            if let Ok(s) = OpSharding::decode(&good[..cut]) {
                let _ = s.to_string();
            }
        }
        let truncated = &good[..good.len() - 1];
        let e = OpSharding::decode(truncated).unwrap_err().to_string();
        assert!(e.contains("not a valid serialized OpSharding"), "{e}");
        for garbage in [
            &[0xff_u8; 12][..],
            b"\x08",
            b"\x0a\xff\xff\xff\xff\x0f",
            b"hello",
        ] {
            let e = OpSharding::decode(garbage).unwrap_err().to_string();
            assert!(e.contains("not a valid serialized OpSharding"), "{e}");
        }
        let cases: Vec<(proto::OpSharding, &str)> = vec![
            (
                proto::OpSharding {
                    r#type: 42,
                    ..Default::default()
                },
                "unknown sharding type 42",
            ),
            (tiled(&[2, 2]), "need 4 devices but the assignment has 0"),
            (tiled(&[]), "without tile_assignment_dimensions"),
            (
                {
                    let mut p = tiled(&[2, -2]);
                    p.tile_assignment_devices = vec![0, 1];
                    p
                },
                "negative",
            ),
            (
                {
                    let mut p = tiled(&[1 << 20, 1 << 20]);
                    p.iota_reshape_dims = vec![1 << 40];
                    p
                },
                "names more than",
            ),
            (
                {
                    let mut p = tiled(&[2, 2]);
                    p.iota_reshape_dims = vec![2, 2];
                    p.iota_transpose_perm = vec![0, 0];
                    p
                },
                "not a permutation",
            ),
            (
                {
                    let mut p = tiled(&[2]);
                    p.iota_reshape_dims = vec![2];
                    p.iota_transpose_perm = vec![0, 1];
                    p
                },
                "not a permutation",
            ),
            (
                proto::OpSharding {
                    r#type: 1,
                    tile_assignment_devices: vec![0, 1],
                    ..Default::default()
                },
                "names 2 devices instead of one",
            ),
            (
                proto::OpSharding {
                    r#type: 0,
                    tuple_shardings: vec![proto::OpSharding::default()],
                    ..Default::default()
                },
                "tuple element",
            ),
            (
                {
                    let mut p = tiled(&[2]);
                    p.iota_reshape_dims = vec![2];
                    p.replicate_on_last_tile_dim = true;
                    p.last_tile_dims = vec![0];
                    p
                },
                "trailing",
            ),
        ];
        for (p, want) in cases {
            let e = OpSharding::decode(&enc(&p)).unwrap_err().to_string();
            assert!(e.contains(want), "{want:?} not in {e:?}");
        }
    }

    #[test]
    fn deep_nesting_is_refused_not_a_stack_overflow() {
        // 500 nested tuple elements: prost's recursion limit (100) refuses it.
        let mut bytes: Vec<u8> = Vec::new();
        for _ in 0..500 {
            let mut outer = vec![0x08, 0x02, 0x2a];
            let mut len = bytes.len();
            loop {
                let b = (len & 0x7f) as u8;
                len >>= 7;
                if len == 0 {
                    outer.push(b);
                    break;
                }
                outer.push(b | 0x80);
            }
            outer.extend_from_slice(&bytes);
            bytes = outer;
        }
        assert!(OpSharding::decode(&bytes).is_err());
    }
}
