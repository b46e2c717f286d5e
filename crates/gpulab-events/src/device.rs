//! The device a run used, as a backend opened it and as telemetry needs to find it
//! again: plain data, so telemetry reads it without knowing any backend.

use crate::event::Meta;
use crate::vocab::DeviceKind;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    pub name: String,
    pub vendor: String,
    pub driver_version: String,
    pub platform: String,
    pub kind: DeviceKind,
    pub total_bytes: Option<u64>,
    /// `0000:01:00.0` style, when the platform exposes it (NVIDIA does).
    pub pci_bus_id: Option<String>,
}

impl DeviceInfo {
    /// The device a stream's `meta` event names.
    pub fn from_meta(m: &Meta) -> DeviceInfo {
        DeviceInfo {
            name: m.device.name.clone(),
            vendor: m.device.vendor.clone(),
            driver_version: m.device.driver_version.clone(),
            platform: m.platform.clone(),
            kind: m.device.kind,
            total_bytes: m.device.total_bytes,
            pci_bus_id: m.device.pci_bus_id.clone(),
        }
    }
}
