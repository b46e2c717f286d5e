//! What the meta event says about the opened device: names, versions, memory and
//! the PCI bus id in NVML's format, so telemetry can find the same GPU in NVML.

use cl3::device::get_device_data;
use cl3::types::{cl_device_id, cl_uint};
use opencl3::device::Device;

use crate::DeviceInfo;
use crate::discover::ClDevice;

/// `cl_nv_device_attribute_query`.
const CL_DEVICE_PCI_BUS_ID_NV: cl_uint = 0x4008;
const CL_DEVICE_PCI_SLOT_ID_NV: cl_uint = 0x4009;
const CL_DEVICE_PCI_DOMAIN_ID_NV: cl_uint = 0x400A;
/// `cl_khr_pci_bus_info`: `{domain, bus, device, function}` as four `cl_uint`.
const CL_DEVICE_PCI_BUS_INFO_KHR: cl_uint = 0x410F;

pub fn device_info(dev: &ClDevice, id: cl_device_id) -> DeviceInfo {
    DeviceInfo {
        name: dev.name.clone(),
        vendor: dev.vendor.clone(),
        driver_version: dev.driver_version.clone(),
        platform: format!("{} ({})", dev.platform, dev.platform_version),
        kind: dev.kind,
        total_bytes: Some(dev.global_mem_bytes).filter(|&b| b > 0),
        pci_bus_id: pci_bus_id(id),
    }
}

fn uint(id: cl_device_id, param: cl_uint) -> Option<u32> {
    let bytes = get_device_data(id, param).ok()?;
    Some(u32::from_ne_bytes(bytes.get(..4)?.try_into().ok()?))
}

/// NVML's `busId` format (`NVML_DEVICE_PCI_BUS_ID_FMT` is `%08X:%02X:%02X.0`).
pub fn format_bus_id(domain: u32, bus: u32, device: u32, function: u32) -> String {
    format!("{domain:08X}:{bus:02X}:{device:02X}.{function:X}")
}

fn pci_bus_id(id: cl_device_id) -> Option<String> {
    let ext = Device::new(id).extensions().unwrap_or_default();
    if ext.contains("cl_nv_device_attribute_query")
        && let (Some(bus), Some(slot)) = (
            uint(id, CL_DEVICE_PCI_BUS_ID_NV),
            uint(id, CL_DEVICE_PCI_SLOT_ID_NV),
        )
    {
        // The NV slot id is the PCI device number: an H100 on driver 580 reports
        // bus 0, slot 6 where NVML says 00000000:00:06.0.
        let domain = uint(id, CL_DEVICE_PCI_DOMAIN_ID_NV).unwrap_or(0);
        return Some(format_bus_id(domain, bus, slot, 0));
    }
    if ext.contains("cl_khr_pci_bus_info") {
        let b = get_device_data(id, CL_DEVICE_PCI_BUS_INFO_KHR).ok()?;
        let w = |i: usize| -> Option<u32> {
            Some(u32::from_ne_bytes(
                b.get(i * 4..i * 4 + 4)?.try_into().ok()?,
            ))
        };
        return Some(format_bus_id(w(0)?, w(1)?, w(2)?, w(3)?));
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn bus_ids_read_as_nvml_prints_them() {
        assert_eq!(super::format_bus_id(0, 1, 0, 0), "00000000:01:00.0");
        assert_eq!(super::format_bus_id(1, 0xaf, 0x1f, 0), "00000001:AF:1F.0");
    }
}
