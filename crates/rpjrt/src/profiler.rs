//! The plugin's own profiler (the PJRT Profiler extension, which XLA's GPU plugins and
//! libtpu have), and its data put into a [`Trace`](crate::trace::Trace): the serialized `XSpace` kept as it
//! is (written beside the trace by [`Trace::save`](crate::trace::Trace::save)) and, where it decodes, its events
//! added to the trace on a process row of their own.

use std::sync::Mutex;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::raw::profiler as rawp;

/// A profiler of the plugin, created by [`Client::profiler`]. Use it as
/// `start` → (work) → `stop` → `collect`; [`PluginProfiler::finish`] does the last two.
pub struct PluginProfiler {
    raw: Mutex<rawp::Profiler>,
}

impl std::fmt::Debug for PluginProfiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PluginProfiler")
    }
}

impl Client {
    /// A new profiler of this client's plugin, not yet started. `Unsupported`, naming the
    /// Profiler extension, when the plugin has none (the CPU plugins); an error when the
    /// extension is there but unusable.
    pub fn profiler(&self) -> Result<PluginProfiler> {
        self.core().check("client")?;
        let api = self.plugin().inner.api;
        let Some(p) = rawp::profiler_api(api)? else {
            return Err(Error::Unsupported {
                what: "the plugin's own profiler (the PJRT Profiler extension)".into(),
                needs: api.version(),
                plugin: api.version(),
                missing_slot: true,
            });
        };
        Ok(PluginProfiler {
            raw: Mutex::new(p.create(&[])?),
        })
    }
}

impl PluginProfiler {
    fn lock(&self) -> std::sync::MutexGuard<'_, rawp::Profiler> {
        self.raw.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the plugin's collection.
    pub fn start(&self) -> Result<()> {
        self.lock().start()
    }

    /// Stops the plugin's collection.
    pub fn stop(&self) -> Result<()> {
        self.lock().stop()
    }

    /// What the plugin collected: a serialized `XSpace` (XLA's `xplane.proto`), as the
    /// plugin wrote it. Call after [`PluginProfiler::stop`].
    pub fn collect(&self) -> Result<Vec<u8>> {
        self.lock().collect()
    }

    /// [`PluginProfiler::stop`], then [`PluginProfiler::collect`].
    pub fn finish(&self) -> Result<Vec<u8>> {
        self.stop()?;
        self.collect()
    }

    /// A started profiler of `client`'s plugin, or why there is none (the error
    /// [`Trace::attach_plugin_profile`](crate::trace::Trace::attach_plugin_profile) records).
    pub fn begin(client: &Client) -> Result<PluginProfiler> {
        let p = client.profiler()?;
        p.start()?;
        Ok(p)
    }
}
