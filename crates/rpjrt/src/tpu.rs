//! libtpu on a machine without a TPU.
//!
//! Off a Cloud TPU VM, libtpu's `PJRT_Plugin_Initialize` keeps retrying the cloud metadata
//! server for about 11 minutes before it gives up. With `TPU_SKIP_MDS_QUERY=1` it answers at
//! once, and client creation then fails quickly ("No jellyfish device found"), so discovery
//! moves on to the next plugin. JAX sets the same variable when it counts no TPU chips.
//!
//! Before loading a library whose file name starts with `libtpu`,
//! [`Plugin::load`](crate::Plugin::load) sets the variables of [`OFF_TPU_DEFAULTS`] that the
//! user has not set, when this machine has no TPU. This is the one place where rpjrt changes
//! the process environment; it happens before the library is loaded, and only for libtpu.

use std::path::Path;

/// The settings libtpu gets off a TPU machine, unless the user set them.
pub const OFF_TPU_DEFAULTS: &[(&str, &str)] = &[("TPU_SKIP_MDS_QUERY", "1")];

/// Google's PCI vendor id, which TPU chips carry.
const GOOGLE_PCI_VENDOR: &str = "0x1ae0";

/// Whether this machine shows a TPU: a PCI device of Google's vendor id, or the device
/// nodes TPU runtimes open (`/dev/accel*`, `/dev/vfio/<group>`).
pub fn tpu_present() -> bool {
    let pci = std::fs::read_dir("/sys/bus/pci/devices").is_ok_and(|entries| {
        entries.filter_map(|e| e.ok()).any(|e| {
            std::fs::read_to_string(e.path().join("vendor"))
                .is_ok_and(|v| v.trim() == GOOGLE_PCI_VENDOR)
        })
    });
    let accel = std::fs::read_dir("/dev").is_ok_and(|entries| {
        entries
            .filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().starts_with("accel"))
    });
    let vfio = std::fs::read_dir("/dev/vfio").is_ok_and(|entries| {
        entries
            .filter_map(|e| e.ok())
            .any(|e| e.file_name() != "vfio")
    });
    pci || accel || vfio
}

/// Whether `path` names libtpu (by its file name, as the wheel and `TPU_LIBRARY_PATH` do).
pub fn is_libtpu(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("libtpu"))
}

/// The variables to set before loading `path`: [`OFF_TPU_DEFAULTS`] for libtpu when
/// `present` is false, less those `is_set` says the user set.
pub fn defaults_for(
    path: &Path,
    present: bool,
    is_set: impl Fn(&str) -> bool,
) -> Vec<(&'static str, &'static str)> {
    if !is_libtpu(path) || present {
        return Vec::new();
    }
    OFF_TPU_DEFAULTS
        .iter()
        .copied()
        .filter(|(k, _)| !is_set(k))
        .collect()
}

/// Sets the off-TPU defaults before `path` is loaded (see the module documentation).
pub(crate) fn prepare(path: &Path) {
    if !is_libtpu(path) {
        return;
    }
    for (k, v) in defaults_for(path, tpu_present(), |k| std::env::var_os(k).is_some()) {
        std::env::set_var(k, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libtpu_off_a_tpu_machine_skips_the_metadata_server() {
        let tpu = Path::new("/venv/libtpu/libtpu.so");
        assert_eq!(
            defaults_for(tpu, false, |_| false),
            vec![("TPU_SKIP_MDS_QUERY", "1")]
        );
        // On a TPU machine, for the user's own setting, and for other plugins: nothing.
        assert!(defaults_for(tpu, true, |_| false).is_empty());
        assert!(defaults_for(tpu, false, |k| k == "TPU_SKIP_MDS_QUERY").is_empty());
        assert!(
            defaults_for(Path::new("/x/pjrt_c_api_cpu_plugin.so"), false, |_| false).is_empty()
        );
    }
}
