//! Dropping every capability of the calling thread before a confined process starts: done by
//! the spawning thread (#56) and again by the network helper inside its new user namespace,
//! where it holds a full set (#57).

/// Drops every capability of the calling thread (bounding, ambient, effective, permitted,
/// inheritable), so a process it starts has none even as root: no `CAP_SYS_ADMIN` to reach
/// another process's memory or terminal, no `CAP_MKNOD`, no `CAP_NET_ADMIN`. A runner
/// without them gets `EPERM` for the bounding set, which it cannot widen anyway.
pub(crate) fn drop_capabilities() {
    use rustix::thread::{
        CapabilitySet, CapabilitySets, clear_ambient_capability_set,
        remove_capability_from_bounding_set, set_capabilities,
    };
    for bit in 0..64 {
        let _ = remove_capability_from_bounding_set(CapabilitySet::from_bits_retain(1 << bit));
    }
    let _ = clear_ambient_capability_set();
    let _ = set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    );
}
