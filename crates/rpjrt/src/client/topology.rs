//! Topology descriptions and compiling without devices.
//!
//! Where a plugin describes its topology (platform, device descriptions), rpjrt can compile
//! for it without devices (`PJRT_Compile`) and write an artifact that a client of the same
//! target loads later. What the CPU plugins do: both describe a client's topology; the
//! 0.115 plugin compiles for it, while the 0.81 plugin has no compiler behind `PJRT_Compile`
//! (NOT_FOUND); neither creates a topology without a client (UNIMPLEMENTED). Each lack is
//! reported as [`Error::Unsupported`].

use std::fmt;
use std::sync::Arc;

use crate::client::aot::{Artifact, ArtifactTarget};
use crate::client::{Client, ClientCore};
use crate::error::{Error, Result};
use crate::options::CompileOptions;
use crate::plugin::Plugin;
use crate::program::Program;
use crate::raw::aot::{self as raw, TopologyFacts, TopologyPtr};
use crate::raw::Api;

/// A plugin's description of a set of devices.
pub struct Topology {
    api: &'static Api,
    plugin: Plugin,
    ptr: TopologyPtr,
    /// True when we created it (and destroy it); false when a client owns it.
    owned: bool,
    facts: TopologyFacts,
    client: Option<Arc<ClientCore>>,
}

impl Drop for Topology {
    fn drop(&mut self) {
        if self.owned {
            let _ = raw::topology_destroy(self.api, self.ptr);
        }
    }
}

impl Client {
    /// The topology of this client's devices, where the plugin describes one.
    pub fn topology(&self) -> Result<Topology> {
        self.core.check("client")?;
        let api = self.core.api;
        let ptr = raw::client_topology(&self.core.raw)?;
        let facts = raw::topology_facts(api, ptr)?;
        Ok(Topology {
            api,
            plugin: self.core.plugin.clone(),
            ptr,
            owned: false,
            facts,
            client: Some(Arc::clone(&self.core)),
        })
    }
}

impl Plugin {
    /// Creates a named topology without a client (for compiling ahead of time), where the
    /// plugin supports it.
    pub fn topology(&self, name: &str) -> Result<Topology> {
        let api = self.inner.api;
        let ptr = raw::topology_create(api, name)?;
        let facts = match raw::topology_facts(api, ptr) {
            Ok(f) => f,
            Err(e) => {
                let _ = raw::topology_destroy(api, ptr);
                return Err(e);
            }
        };
        Ok(Topology {
            api,
            plugin: self.clone(),
            ptr,
            owned: true,
            facts,
            client: None,
        })
    }
}

impl Topology {
    /// The platform name.
    pub fn platform_name(&self) -> &str {
        &self.facts.platform_name
    }
    /// The platform version.
    pub fn platform_version(&self) -> &str {
        &self.facts.platform_version
    }
    /// `(id, kind)` of each device it describes.
    pub fn devices(&self) -> &[(i32, String)] {
        &self.facts.device_kinds
    }
    /// A client's topology follows its client's `close()`; one made from a plugin has none.
    fn check(&self) -> Result<()> {
        self.client.as_ref().map_or(Ok(()), |c| c.check("topology"))
    }

    /// The plugin's fingerprint of the topology, where it gives one.
    pub fn fingerprint(&self) -> Option<u64> {
        self.facts.fingerprint
    }
    /// The plugin's serialized form of the topology.
    pub fn serialize(&self) -> Result<Vec<u8>> {
        self.check()?;
        raw::topology_serialize(self.api, self.ptr)
    }

    /// The artifact target of a client on this topology.
    pub fn target(&self) -> ArtifactTarget {
        let mut t = ArtifactTarget::of_plugin(&self.plugin);
        t.platform_name = self.facts.platform_name.clone();
        t.platform_version = self.facts.platform_version.clone();
        let mut kinds: Vec<String> = Vec::new();
        for (_, k) in &self.facts.device_kinds {
            if !kinds.contains(k) {
                kinds.push(k.clone());
            }
        }
        t.device_kind = kinds.join(",");
        t.device_count = self.facts.device_kinds.len();
        t
    }

    /// Compiles for this topology without devices and returns an rpjrt artifact that
    /// [`Client::load`] accepts on a matching client.
    pub fn compile(&self, program: &Program, options: &CompileOptions) -> Result<Vec<u8>> {
        self.check()?;
        self.plugin.check_program(program)?;
        let ids: Vec<i64> = self
            .facts
            .device_kinds
            .iter()
            .map(|(i, _)| i64::from(*i))
            .collect();
        let encoded = options
            .effective(program, self.platform_name())
            .encode(&ids)?;
        let (code, format) = match program {
            Program::Mlir(c) => (c.as_slice(), "mlir"),
            Program::Hlo(c) => (c.as_slice(), "hlo"),
        };
        if code.is_empty() {
            return Err(Error::invalid("the program is empty"));
        }
        let blob = raw::topology_compile_serialized(self.api, self.ptr, code, format, &encoded)
            .map_err(|e| crate::stablehlo::explain(&self.plugin, program, e))?;
        Ok(Artifact {
            target: self.target(),
            compile_options: encoded,
            blob,
            extra: vec![(
                "rpjrt_version".to_string(),
                env!("CARGO_PKG_VERSION").to_string(),
            )],
        }
        .encode())
    }
}

impl fmt::Debug for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Topology({} {}, {} devices)",
            self.facts.platform_name,
            self.facts.platform_version,
            self.facts.device_kinds.len()
        )
    }
}
