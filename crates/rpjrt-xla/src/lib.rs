//! XLA's protocol buffers as rpjrt decodes them on the host, with no plugin.
//!
//! Today this is [`OpSharding`], the sharding XLA records for each parameter and output of
//! a compiled program (what `rpjrt::Executable::parameter_shardings` returns). The types
//! are re-exported by `rpjrt`; errors are `rpjrt`'s own [`Error`] type.
//!
//! ```
//! use rpjrt_xla::{OpSharding, ShardingType};
//! // type OTHER, tile dims [2, 1], iota over 2 devices
//! let s = OpSharding::decode(&[8, 3, 26, 2, 2, 1, 74, 1, 2])?;
//! assert_eq!(s.kind, ShardingType::Other);
//! assert_eq!(s.to_string(), "{devices=[2,1]<=[2]}");
//! assert!(OpSharding::decode(&[8, 3, 26, 2, 2, 1, 34, 1, 5]).is_err());
//! # Ok::<(), rpjrt_raw::error::Error>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod op_sharding;

pub use op_sharding::{OpSharding, ShardGroup, ShardingType};
pub use rpjrt_raw::error::{Error, Result};
