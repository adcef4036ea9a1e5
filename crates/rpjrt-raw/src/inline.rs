//! A small vector that keeps up to `N` items inline and spills to the heap beyond that.
//!
//! Used on the execute path (argument and output pointer lists) and for buffer shapes, so
//! that the common small cases allocate nothing.

use std::fmt;
use std::ops::Deref;

/// Up to `N` `Copy` items inline, more on the heap.
#[derive(Clone)]
pub enum Inline<T: Copy, const N: usize> {
    /// `len <= N` items at the front of `items`.
    Stack {
        /// How many items are in use.
        len: usize,
        /// The storage; the first `len` are the items.
        items: [T; N],
    },
    /// More than `N` items.
    Heap(Box<[T]>),
}

impl<T: Copy, const N: usize> Inline<T, N> {
    /// `len` copies of `value`.
    #[inline]
    pub fn filled(len: usize, value: T) -> Self {
        if len <= N {
            Inline::Stack {
                len,
                items: [value; N],
            }
        } else {
            Inline::Heap(vec![value; len].into_boxed_slice())
        }
    }
}

impl<T: Copy + Default, const N: usize> Inline<T, N> {
    /// A copy of `items`.
    #[inline]
    pub fn from_slice(items: &[T]) -> Self {
        Self::from_exact_iter(items.len(), items.iter().copied())
    }

    /// The first `len` items of `iter` (which must yield at least `len`; missing items are
    /// `T::default()`).
    #[inline]
    pub fn from_exact_iter(len: usize, iter: impl IntoIterator<Item = T>) -> Self {
        let mut v = Self::filled(len, T::default());
        for (slot, item) in v.as_mut_slice().iter_mut().zip(iter) {
            *slot = item;
        }
        v
    }
}

impl<T: Copy, const N: usize> Inline<T, N> {
    /// The items.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        match self {
            Inline::Stack { len, items } => &items[..*len],
            Inline::Heap(b) => b,
        }
    }

    /// The items, mutably.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        match self {
            Inline::Stack { len, items } => &mut items[..*len],
            Inline::Heap(b) => b,
        }
    }
}

impl<T: Copy, const N: usize> Deref for Inline<T, N> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Copy + fmt::Debug, const N: usize> fmt::Debug for Inline<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_slice(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_stays_inline_and_large_spills() {
        let a = Inline::<i64, 4>::from_slice(&[1, 2, 3]);
        assert!(matches!(a, Inline::Stack { len: 3, .. }));
        assert_eq!(&*a, &[1, 2, 3]);
        let b = Inline::<i64, 4>::from_slice(&[1, 2, 3, 4, 5]);
        assert!(matches!(b, Inline::Heap(_)));
        assert_eq!(&*b, &[1, 2, 3, 4, 5]);
        let mut c = Inline::<u8, 2>::filled(2, 7);
        c.as_mut_slice()[1] = 9;
        assert_eq!(&*c, &[7, 9]);
        assert_eq!(&*Inline::<u8, 2>::from_exact_iter(0, []), &[] as &[u8]);
        assert_eq!(format!("{:?}", Inline::<u8, 2>::from_slice(&[1])), "[1]");
    }
}
