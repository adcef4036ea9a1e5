//! Multi-process clients: the KV callbacks and create options on both real CPU plugins
//! (what each does with them), and the global device view through the fake plugin.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{for_each_plugin_only, is_old};
use rpjrt::{Client, ClientOptions, Code, CompileOptions, Plugin, Program};
use rpjrt::{DistributedOptions, KvStore};

/// The smallest store that waits: a map behind a lock, and a condition variable that wakes
/// waiters when a key is set. (The shipped stores live in rpjrt-distributed.)
#[derive(Default)]
struct InMemoryStore {
    map: Mutex<std::collections::HashMap<String, Vec<u8>>>,
    changed: std::sync::Condvar,
}

impl InMemoryStore {
    fn new() -> InMemoryStore {
        InMemoryStore::default()
    }
}

impl KvStore for InMemoryStore {
    fn set(&self, key: &str, value: &[u8]) -> rpjrt::Result<()> {
        self.map
            .lock()
            .unwrap()
            .insert(key.to_string(), value.to_vec());
        self.changed.notify_all();
        Ok(())
    }
    fn get(&self, key: &str, timeout: Duration) -> rpjrt::Result<Vec<u8>> {
        let map = self.map.lock().unwrap();
        let (map, _) = self
            .changed
            .wait_timeout_while(map, timeout, |m| !m.contains_key(key))
            .unwrap();
        map.get(key).cloned().ok_or_else(|| rpjrt::Error::Store {
            code: Code::DeadlineExceeded,
            message: format!("key {key:?} was not set within {timeout:?}"),
        })
    }
    fn try_get(&self, key: &str) -> rpjrt::Result<Option<Vec<u8>>> {
        Ok(self.map.lock().unwrap().get(key).cloned())
    }
}

/// A store that counts the calls the plugin makes.
#[derive(Default)]
struct Counting {
    inner: InMemoryStore,
    sets: AtomicUsize,
    gets: AtomicUsize,
    try_gets: AtomicUsize,
}

impl KvStore for Counting {
    fn set(&self, key: &str, value: &[u8]) -> rpjrt::Result<()> {
        self.sets.fetch_add(1, Ordering::SeqCst);
        self.inner.set(key, value)
    }
    fn get(&self, key: &str, timeout: Duration) -> rpjrt::Result<Vec<u8>> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        self.inner.get(key, timeout)
    }
    fn try_get(&self, key: &str) -> rpjrt::Result<Option<Vec<u8>>> {
        self.try_gets.fetch_add(1, Ordering::SeqCst);
        self.inner.try_get(key)
    }
}

impl Counting {
    fn calls(&self) -> (usize, usize, usize) {
        (
            self.sets.load(Ordering::SeqCst),
            self.gets.load(Ordering::SeqCst),
            self.try_gets.load(Ordering::SeqCst),
        )
    }
}

#[test]
fn cpu_plugins_accept_the_callbacks_but_form_no_multi_process_client() {
    for_each_plugin_only(|plugin| {
        let store = Arc::new(Counting::default());
        let dist = DistributedOptions::new(store.clone(), 1, 2).unwrap();
        let client = Client::new_distributed(plugin, &ClientOptions::new(), &dist).unwrap();
        let devices = client.devices().unwrap();
        // Neither plugin calls the store: no rendezvous happens.
        assert_eq!(store.calls(), (0, 0, 0));
        // Every device is local: the plugin formed a single-process client.
        assert_eq!(client.addressable_devices().unwrap().len(), devices.len());
        assert!(devices.iter().all(|d| d.is_addressable()));
        let (ids, pis): (Vec<i32>, Vec<i32>) =
            devices.iter().map(|d| (d.id(), d.process_index())).unzip();
        if is_old(plugin) {
            // 0.81 ignores node_id/num_nodes (and any option it does not know).
            assert_eq!(client.process_index().unwrap(), 0);
            assert_eq!(ids, vec![0, 1, 2, 3]);
            assert_eq!(pis, vec![0; 4]);
        } else {
            // 0.115 refuses num_nodes/node_id; the retry sends process_id = 1, which makes
            // it number its devices from 1 << 11 and report process index 1 for them.
            assert_eq!(ids, vec![2048, 2049, 2050, 2051]);
            assert_eq!(pis, vec![1; 4]);
            assert_eq!(client.process_index().unwrap(), 1);
        }
        // The client still computes on its own devices.
        let exe = client
            .compile(
                &Program::mlir(
                    "func.func public @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n\
                     %0 = stablehlo.add %a, %a : tensor<2xf32>\n return %0 : tensor<2xf32>\n}",
                ),
                &CompileOptions::default(),
            )
            .unwrap();
        let d = client.default_device().unwrap();
        let x = client.buffer_from_slice(&[1.0f32, 2.0], &[2], &d).unwrap();
        let out = exe.execute(&[&x]).unwrap();
        assert_eq!(out[0].to_vec_of::<f32>().unwrap(), vec![2.0, 4.0]);
    });
}

#[test]
fn the_new_cpu_plugin_refuses_num_nodes_by_name() {
    for_each_plugin_only(|plugin| {
        let r = Client::new(
            plugin,
            &ClientOptions::new()
                .set("num_nodes", 2i64)
                .set("node_id", 1i64),
        );
        if is_old(plugin) {
            assert!(r.is_ok());
        } else {
            let e = r.unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument);
            assert!(e.to_string().contains("Unexpected option name"), "{e}");
        }
    });
}

#[test]
fn explicit_options_are_sent_as_given() {
    for_each_plugin_only(|plugin| {
        let store = Arc::new(InMemoryStore::new());
        let dist = DistributedOptions::new(store, 0, 2).unwrap();
        let opts = ClientOptions::new().set("process_id", 0i64);
        let client = Client::new_distributed(plugin, &opts, &dist).unwrap();
        assert_eq!(client.process_index().unwrap(), 0);
        assert_eq!(client.devices().unwrap()[0].id(), 0);
    });
}

#[test]
fn distributed_options_check_their_ids() {
    let store: Arc<dyn KvStore> = Arc::new(InMemoryStore::new());
    let e = DistributedOptions::new(store.clone(), 2, 2).unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
    assert!(DistributedOptions::new(store, 0, 0).is_err());
}

// ---------------------------------------------------------------------- the fake plugin

const KNOBS: [&str; 3] = [
    "RPJRT_FAKE_VERSION",
    "RPJRT_FAKE_ALLOWED_OPTIONS",
    "RPJRT_FAKE_KV",
];

/// A fresh copy of the fake plugin with the given knobs.
fn fake(knobs: &[(&str, &str)]) -> Plugin {
    common::load_fake(knobs, &KNOBS).expect("fake plugin loads")
}

fn roundtrip() -> ClientOptions {
    ClientOptions::new().set("fake_kv_roundtrip", true)
}

#[test]
fn fake_exchanges_keys_through_the_callbacks_and_gets_try_get_from_061() {
    for (version, try_get_sent) in [("0.114", true), ("0.61", true), ("0.60", false)] {
        let plugin = fake(&[("RPJRT_FAKE_VERSION", version)]);
        let store = Arc::new(Counting::default());
        let dist = DistributedOptions::new(store.clone(), 0, 1).unwrap();
        Client::new_distributed(&plugin, &roundtrip(), &dist).unwrap();
        let (sets, gets, try_gets) = store.calls();
        assert_eq!((sets, gets), (1, 1), "at {version}");
        assert_eq!(try_gets, usize::from(try_get_sent), "at {version}");
    }
}

#[test]
fn fake_sees_node_id_and_num_nodes_or_process_id_when_it_refuses_them() {
    let plugin = fake(&[]);
    let store: Arc<dyn KvStore> = Arc::new(InMemoryStore::new());
    let dist = DistributedOptions::new(store.clone(), 1, 3).unwrap();
    let c = Client::new_distributed(&plugin, &ClientOptions::new(), &dist).unwrap();
    let v = c.platform_version().unwrap();
    assert!(
        v.contains("node_id=int64:1") && v.contains("num_nodes=int64:3"),
        "{v}"
    );

    let plugin = fake(&[("RPJRT_FAKE_ALLOWED_OPTIONS", "process_id")]);
    let c = Client::new_distributed(&plugin, &ClientOptions::new(), &dist).unwrap();
    let v = c.platform_version().unwrap();
    assert!(
        v.contains("process_id=int64:1") && !v.contains("num_nodes"),
        "{v}"
    );

    let plugin = fake(&[("RPJRT_FAKE_ALLOWED_OPTIONS", "something_else")]);
    let c = Client::new_distributed(&plugin, &ClientOptions::new(), &dist).unwrap();
    let v = c.platform_version().unwrap();
    assert!(!v.contains("process_id") && !v.contains("num_nodes"), "{v}");
}

/// A store whose every call fails, as when a peer never arrives.
struct Unreachable;
impl KvStore for Unreachable {
    fn set(&self, _: &str, _: &[u8]) -> rpjrt::Result<()> {
        Ok(())
    }
    fn get(&self, key: &str, _: Duration) -> rpjrt::Result<Vec<u8>> {
        let store = InMemoryStore::new();
        // A real timeout error from a store, naming the key (and so the process).
        store.get(&format!("{key} (process 3)"), Duration::from_millis(1))
    }
    fn try_get(&self, _: &str) -> rpjrt::Result<Option<Vec<u8>>> {
        Ok(None)
    }
}

#[test]
fn a_store_error_fails_client_creation_with_its_message() {
    let plugin = fake(&[]);
    let dist = DistributedOptions::new(Arc::new(Unreachable), 0, 4).unwrap();
    let e = Client::new_distributed(&plugin, &roundtrip(), &dist).unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    assert!(e.to_string().contains("process 3"), "{e}");
}

#[test]
fn global_view_lists_other_processes_devices_as_not_addressable() {
    let plugin = fake(&[]);
    let opts = ClientOptions::new()
        .set("fake_device_count", 4i64)
        .set("fake_addressable_device_count", 2i64)
        .set("fake_process_index", 0i64);
    let dist = DistributedOptions::new(Arc::new(InMemoryStore::new()), 0, 2).unwrap();
    let c = Client::new_distributed(&plugin, &opts, &dist).unwrap();
    let all = c.devices().unwrap();
    assert_eq!(all.len(), 4);
    let local: Vec<(i32, i32)> = c
        .addressable_devices()
        .unwrap()
        .iter()
        .map(|d| (d.id(), d.process_index()))
        .collect();
    assert_eq!(local, vec![(0, 0), (1, 0)]);
    let remote: Vec<(i32, i32, bool)> = all
        .iter()
        .filter(|d| !d.is_addressable())
        .map(|d| (d.id(), d.process_index(), d.is_addressable()))
        .collect();
    assert_eq!(remote, vec![(2, 1, false), (3, 1, false)]);
    // Data cannot be put on another process's device, and the error says why.
    let e = c.buffer_from_slice(&[1.0f32], &[1], &all[3]).unwrap_err();
    assert!(e.to_string().contains("not addressable"), "{e}");
    // Work goes to the local devices by default.
    assert_eq!(c.default_device().unwrap().id(), 0);
    // A 2-replica program on the two local devices: execute_sharded takes one argument
    // list per local device, and refuses a list per global device.
    let exe = c
        .compile(
            &Program::mlir(
                "func.func public @main(%a: tensor<1xf32>) -> tensor<1xf32> {\n  return %a : tensor<1xf32>\n}\n",
            ),
            &CompileOptions {
                num_replicas: 2,
                device_assignment: Some(vec![vec![0], vec![1]]),
                ..CompileOptions::default()
            },
        )
        .unwrap();
    let locals = exe.addressable_devices().unwrap();
    assert_eq!(
        locals.iter().map(|d| d.id()).collect::<Vec<_>>(),
        vec![0, 1]
    );
    let bufs: Vec<_> = locals
        .iter()
        .map(|d| c.buffer_from_slice(&[d.id() as f32], &[1], d).unwrap())
        .collect();
    let out = exe
        .execute_sharded(&[vec![&bufs[0]], vec![&bufs[1]]])
        .unwrap();
    assert_eq!(out.len(), 2);
    let four = vec![
        vec![&bufs[0]],
        vec![&bufs[1]],
        vec![&bufs[0]],
        vec![&bufs[1]],
    ];
    let e = exe.execute_sharded(&four).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
}

/// Caps every wait at `cap`, so a missing peer fails fast in tests.
struct Capped {
    inner: InMemoryStore,
    cap: Duration,
}
impl KvStore for Capped {
    fn set(&self, key: &str, value: &[u8]) -> rpjrt::Result<()> {
        self.inner.set(key, value)
    }
    fn get(&self, key: &str, timeout: Duration) -> rpjrt::Result<Vec<u8>> {
        self.inner.get(key, timeout.min(self.cap))
    }
    fn try_get(&self, key: &str) -> rpjrt::Result<Option<Vec<u8>>> {
        self.inner.try_get(key)
    }
}

#[test]
fn fake_kv_plugin_forms_a_three_process_client_through_the_store() {
    let plugin = fake(&[("RPJRT_FAKE_KV", "1")]);
    let store: Arc<dyn KvStore> = Arc::new(InMemoryStore::new());
    let clients: Vec<Client> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3usize)
            .map(|p| {
                let (plugin, store) = (&plugin, Arc::clone(&store));
                s.spawn(move || {
                    let dist = DistributedOptions::new(store, p, 3).unwrap();
                    // Process p has p + 1 devices.
                    let opts = ClientOptions::new().set("fake_device_count", p as i64 + 1);
                    Client::new_distributed(plugin, &opts, &dist).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (p, c) in clients.iter().enumerate() {
        assert_eq!(c.process_index().unwrap(), p as i32);
        let all = c.devices().unwrap();
        // The same global list everywhere: 1 + 2 + 3 devices, process-major.
        let owners: Vec<i32> = all.iter().map(|d| d.process_index()).collect();
        assert_eq!(owners, vec![0, 1, 1, 2, 2, 2]);
        let local = c.addressable_devices().unwrap();
        assert_eq!(local.len(), p + 1);
        assert!(local
            .iter()
            .all(|d| d.process_index() == p as i32 && d.is_addressable()));
        assert!(all
            .iter()
            .filter(|d| d.process_index() != p as i32)
            .all(|d| !d.is_addressable()));
        // Local work runs on a local device.
        let d = c.default_device().unwrap();
        assert_eq!(d.process_index(), p as i32);
        let x = c.buffer_from_slice(&[p as f32], &[1], &d).unwrap();
        assert_eq!(x.to_vec_of::<f32>().unwrap(), vec![p as f32]);
    }
}

#[test]
fn fake_kv_plugin_names_the_process_that_never_arrived() {
    let plugin = fake(&[("RPJRT_FAKE_KV", "1")]);
    let store = Arc::new(Capped {
        inner: InMemoryStore::new(),
        cap: Duration::from_millis(100),
    });
    // Process 0 of 3 alone: process 1 never publishes its devices.
    let dist = DistributedOptions::new(store, 0, 3).unwrap();
    let e = Client::new_distributed(&plugin, &ClientOptions::new(), &dist).unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    let m = e.to_string();
    assert!(m.contains("waiting for process 1"), "{m}");
    assert!(m.contains("fake:device:1"), "{m}");
}
