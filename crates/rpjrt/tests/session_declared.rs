//! `Session::bind_all_with`: values and loaders bound in one all-or-nothing step, and a
//! loader's declared spec fixed as its slot's (on both CPU plugins).

mod common;

use std::sync::Arc;

use common::*;
use rpjrt::{ArraySpec, ElementType, HostArray, Loader, Session, SlotState, SlotValue};

fn host(values: &[f32], dims: &[i64]) -> SlotValue {
    SlotValue::Host(HostArray::from_owner(
        Arc::new(f32_bytes(values)),
        ElementType::F32,
        dims.to_vec(),
    ))
}

fn f32_spec(dims: &[i64]) -> Option<ArraySpec> {
    Some(ArraySpec {
        element_type: ElementType::F32,
        dims: dims.to_vec(),
    })
}

/// A loader returning `n` ones of shape `[n]`.
fn ones(n: usize) -> Loader {
    Arc::new(move || Ok(host(&vec![1.0; n], &[n as i64])))
}

fn states(s: &Session) -> Vec<(String, SlotState)> {
    s.slots().into_iter().map(|i| (i.name, i.state)).collect()
}

#[test]
fn values_and_loaders_land_together_or_not_at_all() {
    for_each_plugin(|_, client| {
        let s = Session::new(client).unwrap();
        s.bind("a", host(&[1.0; 2], &[2])).unwrap();
        // A declared spec that contradicts the slot's: nothing changes, the slot is named.
        expect_err(
            s.bind_all_with(
                vec![("b".into(), host(&[2.0; 2], &[2]))],
                vec![("a".into(), f32_spec(&[3]), ones(3))],
            ),
            &["slot \"a\" holds float32[2], but it is declared float32[3]"],
        );
        // A value refused: the loader is not bound either.
        expect_err(
            s.bind_all_with(
                vec![("a".into(), host(&[2.0; 4], &[4]))],
                vec![("c".into(), f32_spec(&[3]), ones(3))],
            ),
            &["slot \"a\" holds float32[2]"],
        );
        // One name as a value and a loader.
        expect_err(
            s.bind_all_with(
                vec![("d".into(), host(&[2.0; 3], &[3]))],
                vec![("d".into(), None, ones(3))],
            ),
            &["slot \"d\" is given more than one value"],
        );
        assert_eq!(states(&s), vec![("a".into(), SlotState::Ready)]);
        assert_eq!(s.fetch("a").unwrap().to_vec_of::<f32>().unwrap(), [1.0; 2]);
        // All good: both land.
        s.bind_all_with(
            vec![("a".into(), host(&[5.0; 2], &[2]))],
            vec![("x".into(), f32_spec(&[3]), ones(3))],
        )
        .unwrap();
        assert_eq!(
            states(&s),
            vec![
                ("a".into(), SlotState::Ready),
                ("x".into(), SlotState::Pending)
            ]
        );
        assert_eq!(s.fetch("a").unwrap().to_vec_of::<f32>().unwrap(), [5.0; 2]);
        assert_eq!(s.slots()[1].spec, f32_spec(&[3]));
        assert_eq!(s.fetch("x").unwrap().to_vec_of::<f32>().unwrap(), [1.0; 3]);
    });
}

#[test]
fn a_declared_spec_holds_for_whatever_lands_later() {
    for_each_plugin(|_, client| {
        let s = Session::new(client).unwrap();
        s.bind_all_with(Vec::new(), vec![("x".into(), f32_spec(&[3]), ones(5))])
            .unwrap();
        // A plain bind of another shape is refused before the loader ever ran.
        expect_err(
            s.bind("x", host(&[0.0; 5], &[5])),
            &["slot \"x\" holds float32[3], but the value bound to it is float32[5]"],
        );
        assert_eq!(s.slots()[0].state, SlotState::Pending);
        // The loader's value is checked against the declared spec, naming the slot.
        expect_err(s.fetch("x"), &["slot \"x\" holds float32[3]"]);
        assert_eq!(s.slots()[0].state, SlotState::Pending);
        s.bind("x", host(&[7.0; 3], &[3])).unwrap();
        assert_eq!(s.fetch("x").unwrap().to_vec_of::<f32>().unwrap(), [7.0; 3]);
        // bind and bind_lazy are the one-slot cases of the same step.
        expect_err(s.bind("", host(&[0.0], &[1])), &["a slot name is empty"]);
        expect_err(s.bind_lazy("", ones(1)), &["a slot name is empty"]);
    });
}
