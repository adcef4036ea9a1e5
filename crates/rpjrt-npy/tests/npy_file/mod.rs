//! `.npy` bytes written as numpy writes them, for tests that build archives by hand.

/// A `.npy` member with the header dict `{'descr': descr, 'fortran_order': fortran,
/// 'shape': shape}` (version 1.0, padded to 64 bytes), then `data`.
pub fn npy(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut h = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
        if fortran { "True" } else { "False" }
    );
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(data);
    out
}
