//! Just enough protobuf decoding to read the replica/partition counts and device
//! assignment out of a serialized `CompileOptionsProto`.

/// What the fake reads from compile options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileOptions {
    /// `executable_build_options.num_replicas`.
    pub num_replicas: u64,
    /// `executable_build_options.num_partitions`.
    pub num_partitions: u64,
    /// `executable_build_options.device_assignment.computation_devices[p]
    /// .replica_device_ids[r]`, indexed `[partition][replica]`, when present.
    pub device_assignment: Option<Vec<Vec<i64>>>,
}

enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos).ok_or("truncated varint")?;
            self.pos += 1;
            out |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err("varint too long".into())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).ok_or("length overflow")?;
        let s = self.buf.get(self.pos..end).ok_or("truncated field")?;
        self.pos = end;
        Ok(s)
    }

    fn next(&mut self) -> Result<Option<(u64, Value<'a>)>, String> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let field = key >> 3;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Value::Fixed
            }
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| "length overflow")?;
                Value::Bytes(self.take(n)?)
            }
            5 => {
                self.take(4)?;
                Value::Fixed
            }
            w => return Err(format!("unsupported wire type {w} (field {field})")),
        };
        if field == 0 {
            return Err("field number 0".into());
        }
        Ok(Some((field, value)))
    }
}

fn replica_ids(bytes: &[u8]) -> Result<Vec<i64>, String> {
    let mut ids = Vec::new();
    let mut r = Reader::new(bytes);
    while let Some((field, value)) = r.next()? {
        if field != 1 {
            continue;
        }
        match value {
            Value::Varint(v) => ids.push(v as i64),
            Value::Bytes(packed) => {
                let mut p = Reader::new(packed);
                while p.pos < packed.len() {
                    ids.push(p.varint()? as i64);
                }
            }
            Value::Fixed => return Err("replica_device_ids has the wrong wire type".into()),
        }
    }
    Ok(ids)
}

fn device_assignment(bytes: &[u8]) -> Result<Vec<Vec<i64>>, String> {
    let mut out = Vec::new();
    let mut r = Reader::new(bytes);
    while let Some((field, value)) = r.next()? {
        if let (3, Value::Bytes(b)) = (field, value) {
            out.push(replica_ids(b)?);
        }
    }
    Ok(out)
}

/// Decodes a serialized `CompileOptionsProto`.
pub fn parse_compile_options(bytes: &[u8]) -> Result<CompileOptions, String> {
    let mut opts = CompileOptions {
        num_replicas: 0,
        num_partitions: 0,
        device_assignment: None,
    };
    let mut r = Reader::new(bytes);
    while let Some((field, value)) = r.next()? {
        let (3, Value::Bytes(build)) = (field, value) else {
            continue;
        };
        let mut b = Reader::new(build);
        while let Some((field, value)) = b.next()? {
            match (field, value) {
                (4, Value::Varint(v)) => opts.num_replicas = v,
                (5, Value::Varint(v)) => opts.num_partitions = v,
                (9, Value::Bytes(da)) => opts.device_assignment = Some(device_assignment(da)?),
                _ => {}
            }
        }
    }
    Ok(opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_options() {
        // executable_build_options { device_ordinal: -1, num_replicas: 1, num_partitions: 1 }
        let mut build = vec![0x08];
        build.extend_from_slice(&[0xff; 9]);
        build.push(0x01);
        build.extend_from_slice(&[0x20, 0x01, 0x28, 0x01]);
        let mut bytes = vec![0x1a, build.len() as u8];
        bytes.extend_from_slice(&build);
        let o = parse_compile_options(&bytes).unwrap();
        assert_eq!((o.num_replicas, o.num_partitions), (1, 1));
        assert_eq!(o.device_assignment, None);
    }

    #[test]
    fn device_assignment_packed() {
        // computation_devices { replica_device_ids: [1, 0] (packed) }
        let comp = [0x0a, 0x02, 0x01, 0x00];
        let mut da = vec![0x08, 0x02, 0x10, 0x01, 0x1a, comp.len() as u8];
        da.extend_from_slice(&comp);
        let mut build = vec![0x20, 0x02, 0x28, 0x01, 0x4a, da.len() as u8];
        build.extend_from_slice(&da);
        let mut bytes = vec![0x1a, build.len() as u8];
        bytes.extend_from_slice(&build);
        let o = parse_compile_options(&bytes).unwrap();
        assert_eq!(o.num_replicas, 2);
        assert_eq!(o.device_assignment, Some(vec![vec![1, 0]]));
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(parse_compile_options(&[0x1a, 0x05, 0x01]).is_err());
    }
}
