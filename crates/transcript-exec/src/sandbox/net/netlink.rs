//! Bringing the loopback interface of a fresh network namespace up (it starts down), with one
//! `RTM_NEWLINK` request on a route netlink socket: no `ip` program needed, no `ioctl`.

use std::mem::MaybeUninit;

use rustix::net::netlink::SocketAddrNetlink;
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};

/// `RTM_NEWLINK`.
const RTM_NEWLINK: u16 = 16;
/// `NLMSG_ERROR`: the kernel's acknowledgement (error 0) or refusal.
const NLMSG_ERROR: u16 = 2;
/// `NLM_F_REQUEST | NLM_F_ACK`.
const FLAGS: u16 = 0x1 | 0x4;
/// `IFF_UP`.
const IFF_UP: u32 = 0x1;

/// Sets the interface `index` up in the calling thread's network namespace.
///
/// # Errors
/// The socket cannot be made, or the kernel refused the change (its errno).
pub(crate) fn set_up(index: u32) -> std::io::Result<()> {
    let sock = rustix::net::socket_with(
        AddressFamily::NETLINK,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        None, // NETLINK_ROUTE
    )?;
    let index = i32::try_from(index).map_err(|_| std::io::Error::other("interface index"))?;
    rustix::net::sendto(
        &sock,
        &request(index),
        SendFlags::empty(),
        &SocketAddrNetlink::new(0, 0),
    )?;
    let mut buf = [MaybeUninit::<u8>::uninit(); 512];
    let ((got, _), _) = rustix::net::recv(&sock, &mut buf, RecvFlags::empty())?;
    ack(got)
}

/// `nlmsghdr` (16 bytes) then `ifinfomsg` (16 bytes): interface `index`, `IFF_UP` set.
fn request(index: i32) -> [u8; 32] {
    let mut m = [0u8; 32];
    m[0..4].copy_from_slice(&32u32.to_ne_bytes());
    m[4..6].copy_from_slice(&RTM_NEWLINK.to_ne_bytes());
    m[6..8].copy_from_slice(&FLAGS.to_ne_bytes());
    m[8..12].copy_from_slice(&1u32.to_ne_bytes()); // sequence number
    // ifi_family AF_UNSPEC, pad, ifi_type 0: already zero.
    m[20..24].copy_from_slice(&index.to_ne_bytes());
    m[24..28].copy_from_slice(&IFF_UP.to_ne_bytes()); // ifi_flags
    m[28..32].copy_from_slice(&IFF_UP.to_ne_bytes()); // ifi_change
    m
}

/// The kernel's answer: an `NLMSG_ERROR` whose error is 0, or that error.
fn ack(reply: &[u8]) -> std::io::Result<()> {
    let bad = || std::io::Error::other("netlink: unexpected reply");
    let kind = u16::from_ne_bytes(
        reply
            .get(4..6)
            .ok_or_else(bad)?
            .try_into()
            .map_err(|_| bad())?,
    );
    if kind != NLMSG_ERROR {
        return Err(bad());
    }
    let code = i32::from_ne_bytes(
        reply
            .get(16..20)
            .ok_or_else(bad)?
            .try_into()
            .map_err(|_| bad())?,
    );
    if code == 0 {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(-code))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_request_names_the_interface_and_only_the_up_flag() {
        let m = super::request(1);
        assert_eq!(u32::from_ne_bytes([m[0], m[1], m[2], m[3]]), 32);
        assert_eq!(i32::from_ne_bytes([m[20], m[21], m[22], m[23]]), 1);
        assert_eq!(u32::from_ne_bytes([m[28], m[29], m[30], m[31]]), 1);
    }

    #[test]
    fn an_error_reply_is_the_kernels_errno() {
        let mut reply = [0u8; 36];
        reply[4..6].copy_from_slice(&super::NLMSG_ERROR.to_ne_bytes());
        reply[16..20].copy_from_slice(&(-1i32).to_ne_bytes());
        let e = super::ack(&reply).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(1));
        reply[16..20].copy_from_slice(&0i32.to_ne_bytes());
        assert!(super::ack(&reply).is_ok());
        assert!(super::ack(&[0u8; 3]).is_err());
    }
}
