//! The `.npy` header dict is read as numpy reads it (a Python literal), or refused with
//! what was wrong: never read differently from numpy, never skipped over.

use rpjrt::ElementType;
use rpjrt_npy::read_npy;

/// A version 1.0 `.npy` file with header text `dict` (padded as numpy pads it) and `data`.
fn npy(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut header = dict.to_string();
    header.push_str(&" ".repeat((64 - (10 + header.len() + 1) % 64) % 64));
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The error reading `dict` with `data` gives; panics when it reads.
fn refused(dict: &str, data: &[u8]) -> String {
    match read_npy(&npy(dict, data)) {
        Ok(a) => panic!("{dict} was read: {a:?}"),
        Err(e) => e.to_string(),
    }
}

/// A key given twice is refused: numpy takes the last value silently, rpjrt took the first,
/// so the same file read as float32 here and int32 in numpy, or transposed.
#[test]
fn a_repeated_key_is_refused() {
    let three = f32s(&[1.0, 2.0, 3.0]);
    for dict in [
        "{'descr': '<f4', 'descr': '<i4', 'fortran_order': False, 'shape': (3,), }",
        "{'descr': '<f4', 'fortran_order': False, 'fortran_order': True, 'shape': (3,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'shape': (3,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), \"descr\": '<f4'}",
    ] {
        let e = refused(dict, &three);
        assert!(e.contains("appears twice"), "{dict}: {e}");
    }
}

/// `fortran_order` is `True` or `False` as Python spells them; `Truee`, `true` or `1` are
/// not read as their first letters.
#[test]
fn fortran_order_is_exactly_true_or_false() {
    let three = f32s(&[1.0, 2.0, 3.0]);
    for value in ["Truee", "Falsey", "true", "1", "None", "'False'", ""] {
        let dict = format!("{{'descr': '<f4', 'fortran_order': {value}, 'shape': (3,), }}");
        let e = refused(&dict, &three);
        assert!(e.contains("neither True nor False"), "{dict}: {e}");
    }
}

/// Double quotes, another key order, no trailing comma, extra white space and Python 2's
/// `L` suffix are valid Python literals numpy reads: so does rpjrt.
#[test]
fn valid_python_spellings_of_the_dict_are_read() {
    let data = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    for dict in [
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
        "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 3)}",
        "{'shape': (2,3), 'fortran_order': False, 'descr': '<f4'}",
        "{ 'descr' : '<f4' ,\n 'fortran_order' : False , 'shape' : ( 2 , 3 , ) , }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }",
    ] {
        let a = read_npy(&npy(dict, &data)).unwrap_or_else(|e| panic!("{dict}: {e}"));
        assert_eq!(a.element_type, ElementType::F32, "{dict}");
        assert_eq!(a.dims, vec![2, 3], "{dict}");
        assert_eq!(a.data, data, "{dict}");
    }
}

/// A type code without a byte order (`'f4'`) is the machine's order, as in numpy.
#[test]
fn a_type_without_a_byte_order_is_native() {
    let data: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|x| x.to_ne_bytes()).collect();
    let a = read_npy(&npy(
        "{'descr': 'f4', 'fortran_order': False, 'shape': (2,), }",
        &data,
    ))
    .unwrap();
    assert_eq!(a.element_type, ElementType::F32);
    assert_eq!(a.data, f32s(&[1.0, 2.0]));
}

/// What numpy would not read as a shape tuple of integers, an unknown key, text after the
/// dict, and a string that is not closed are refused, each naming the problem.
#[test]
fn malformed_dicts_are_refused_naming_the_problem() {
    let six = f32s(&[0.0; 6]);
    let cases = [
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': ((2), 3), }",
            "parentheses",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }",
            "dimension",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }",
            "expected ','",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (6), }",
            "(N,)",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': [6], }",
            "not a tuple",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}",
            "unexpected key",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} x",
            "after the header",
        ),
        (
            "{'descr': '<f4, 'fortran_order': False, 'shape': (6,), }",
            "expected ','",
        ),
        ("{'descr': '<f4', 'fortran_order': False}", "no 'shape'"),
        (
            "{descr: '<f4', 'fortran_order': False, 'shape': (6,)}",
            "quoted key",
        ),
        (
            "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,)}",
            "structured",
        ),
        (
            "{'descr': '<\\x66', 'fortran_order': False, 'shape': (6,)}",
            "escape",
        ),
    ];
    for (dict, want) in cases {
        let e = refused(dict, &six);
        assert!(e.contains(want), "{dict}: {e}");
    }
}

/// A Fortran-order array (what `np.save(np.asfortranarray(a))` writes) is read as numpy
/// reads it: its column-major data becomes the row-major data of the same values. It was
/// refused, though numpy reads it.
#[test]
fn fortran_order_arrays_are_read_in_row_major_order() {
    // a[i, j, k] = 100 i + 10 j + k, shape (2, 3, 4), stored column-major (i fastest).
    let (d0, d1, d2) = (2, 3, 4);
    let value = |i: usize, j: usize, k: usize| (100 * i + 10 * j + k) as f32;
    let mut col = Vec::new();
    for k in 0..d2 {
        for j in 0..d1 {
            for i in 0..d0 {
                col.push(value(i, j, k));
            }
        }
    }
    let mut row = Vec::new();
    for i in 0..d0 {
        for j in 0..d1 {
            for k in 0..d2 {
                row.push(value(i, j, k));
            }
        }
    }
    let a = read_npy(&npy(
        "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3, 4), }",
        &f32s(&col),
    ))
    .unwrap();
    assert_eq!(a.dims, vec![2, 3, 4]);
    assert_eq!(a.data, f32s(&row));
    // Big-endian and Fortran order together; a vector is the same either way.
    let be: Vec<u8> = col.iter().flat_map(|x| x.to_be_bytes()).collect();
    let b = read_npy(&npy(
        "{'descr': '>f4', 'fortran_order': True, 'shape': (2, 3, 4), }",
        &be,
    ))
    .unwrap();
    assert_eq!(b.data, f32s(&row));
    let v = read_npy(&npy(
        "{'descr': '<f4', 'fortran_order': True, 'shape': (1, 3), }",
        &f32s(&[1.0, 2.0, 3.0]),
    ))
    .unwrap();
    assert_eq!(v.data, f32s(&[1.0, 2.0, 3.0]));
}
