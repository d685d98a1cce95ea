//! `sroce`: shows and changes the settings of sroce devices over the
//! module's generic netlink family `sroce`.
//!
//! ```text
//! sroce [-j] dev show [DEV]
//! sroce dev set DEV [group-size N] [policy hash|round-robin|least-outstanding|failover]
//!                   [ports MIN-MAX] [reorder-guard on|off]
//! sroce [-j] session show [DEV]
//! sroce qp set DEV QPN [group-size N] [policy POLICY] [reorder-guard on|off]
//! sroce [-j] flow show [DEV]
//! sroce [-j] monitor
//! ```
//!
//! The settings are each device's session defaults for queue pairs that
//! connect afterwards; the kernel validates them (the tool only parses
//! syntax). `session show` lists every connected RC queue pair's sessions,
//! `flow show` what each received per flow it came on.
//! `-j` (`--json`) prints what `show` lists as one JSON array. `monitor`
//! prints session events (a session of a connected queue pair went down,
//! came up or is probing) as they happen, from the `sroce-events` group in
//! this network namespace: one line each, or with `-j` one JSON object per
//! line.

mod flow;
mod json;
mod nl;
mod session;
mod sock;

use sock::{Error, Socket};
use sroce_proto::roce::session::{ctl as abi, Policy};
use std::process::ExitCode;

const USAGE: &str = "usage: sroce [-j] dev show [DEV]
       sroce dev set DEV [group-size N] [policy POLICY] [ports MIN-MAX]
                         [reorder-guard on|off]
       sroce [-j] session show [DEV]
       sroce qp set DEV QPN [group-size N] [policy POLICY] [reorder-guard on|off]
       sroce [-j] flow show [DEV]
       sroce [-j] monitor
POLICY := hash | round-robin | least-outstanding | failover
-j, --json: what show lists, as one JSON array (monitor: one object per line)";

/// A device as `DEV_GET` reports it.
#[derive(Debug, Default, PartialEq, Eq)]
struct DevInfo {
    name: String,
    ifindex: u32,
    group_size: u8,
    policy: Option<Policy>,
    policy_raw: u8,
    port_min: u16,
    port_max: u16,
    reorder_guard: Option<bool>,
}

impl DevInfo {
    fn parse(payload: &[u8]) -> Result<Self, nl::DecodeError> {
        let mut d = DevInfo::default();
        for a in nl::attrs(nl::genl(payload)?.attrs) {
            let a = a?;
            match a.ty {
                abi::ATTR_DEV_NAME => d.name = a.str()?.to_owned(),
                abi::ATTR_IFINDEX => d.ifindex = a.u32()?,
                abi::ATTR_GROUP_SIZE => d.group_size = a.u8()?,
                abi::ATTR_POLICY => {
                    d.policy_raw = a.u8()?;
                    d.policy = abi::policy_from_u8(d.policy_raw);
                }
                abi::ATTR_PORT_MIN => d.port_min = a.u16()?,
                abi::ATTR_PORT_MAX => d.port_max = a.u16()?,
                abi::ATTR_REORDER_GUARD => d.reorder_guard = Some(a.u8()? != 0),
                _ => {}
            }
        }
        Ok(d)
    }

    fn policy_text(&self) -> String {
        match self.policy {
            Some(p) => abi::policy_name(p).to_owned(),
            None => format!("unknown({})", self.policy_raw),
        }
    }

    fn json(&self) -> String {
        let o = json::Object::new()
            .str("dev", &self.name)
            .num("ifindex", self.ifindex.into())
            .num("group_size", self.group_size.into())
            .str("policy", &self.policy_text())
            .num("port_min", self.port_min.into())
            .num("port_max", self.port_max.into());
        match self.reorder_guard {
            Some(g) => o.bool("reorder_guard", g),
            None => o,
        }
        .finish()
    }

    fn line(&self) -> String {
        let policy = match self.policy {
            Some(p) => abi::policy_name(p).to_owned(),
            None => format!("unknown({})", self.policy_raw),
        };
        let guard = match self.reorder_guard {
            Some(true) => " reorder-guard on",
            Some(false) => " reorder-guard off",
            None => "",
        };
        format!(
            "{}: ifindex {} group-size {} policy {} ports {}-{}{guard}",
            self.name, self.ifindex, self.group_size, policy, self.port_min, self.port_max
        )
    }
}

/// A parsed `dev set`.
#[derive(Debug, Default, PartialEq, Eq)]
struct SetArgs {
    dev: String,
    group_size: Option<u8>,
    policy: Option<Policy>,
    ports: Option<(u16, u16)>,
    reorder_guard: Option<bool>,
}

fn parse_set(args: &[&str]) -> Result<SetArgs, String> {
    let (dev, mut rest) = match args {
        [dev, rest @ ..] => (*dev, rest),
        [] => return Err("dev set: device name missing".into()),
    };
    let mut s = SetArgs {
        dev: dev.to_owned(),
        ..SetArgs::default()
    };
    while let [key, tail @ ..] = rest {
        let Some((value, tail)) = tail.split_first() else {
            return Err(format!("dev set: '{key}' needs a value"));
        };
        match *key {
            "group-size" => {
                let n = value.parse().map_err(|_| {
                    format!("dev set: group-size '{value}' is not a number 0..=255")
                })?;
                s.group_size = Some(n);
            }
            "policy" => {
                let p = abi::policy_from_name(value).ok_or_else(|| {
                    format!(
                        "dev set: unknown policy '{value}' (hash, round-robin, least-outstanding, failover)"
                    )
                })?;
                s.policy = Some(p);
            }
            "ports" => {
                let bad = || format!("dev set: ports '{value}' is not MIN-MAX (UDP ports)");
                let (a, b) = value.split_once('-').ok_or_else(bad)?;
                s.ports = Some((a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?));
            }
            "reorder-guard" => {
                s.reorder_guard = Some(match *value {
                    "on" => true,
                    "off" => false,
                    _ => return Err(format!("dev set: reorder-guard '{value}' is not on or off")),
                });
            }
            other => return Err(format!("dev set: unknown setting '{other}'")),
        }
        rest = tail;
    }
    if s.group_size.is_none()
        && s.policy.is_none()
        && s.ports.is_none()
        && s.reorder_guard.is_none()
    {
        return Err("dev set: nothing to set".into());
    }
    Ok(s)
}

fn errno_name(e: i32) -> &'static str {
    match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ERANGE => "ERANGE",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EMSGSIZE => "EMSGSIZE",
        libc::ENOMEM => "ENOMEM",
        _ => "",
    }
}

/// One line describing a failed request.
fn describe(what: &str, e: &Error) -> String {
    match e {
        Error::Io(e) => format!("{what}: {e}"),
        Error::Decode(e) => format!("{what}: bad reply from the kernel: {e}"),
        Error::Kernel(k) => {
            let text = std::io::Error::from_raw_os_error(k.errno).to_string();
            // "Operation not permitted (os error 1)" -> "Operation not permitted"
            let text = text.split(" (os error").next().unwrap_or(&text).to_owned();
            let name = errno_name(k.errno);
            let mut s = if name.is_empty() {
                format!("{what}: {text}")
            } else {
                format!("{what}: {text} ({name})")
            };
            if let Some(m) = &k.msg {
                s.push_str(": ");
                s.push_str(m);
            }
            if k.errno == libc::EPERM && k.msg.is_none() {
                s.push_str(": needs CAP_NET_ADMIN");
            }
            s
        }
    }
}

fn connect() -> Result<(Socket, u16), String> {
    connect_with_groups().map(|(sock, id, _)| (sock, id))
}

/// [`connect`], with the family's multicast groups (name, id).
fn connect_with_groups() -> Result<(Socket, u16, sock::Groups), String> {
    let mut sock =
        Socket::open().map_err(|e| format!("cannot open a generic netlink socket: {e}"))?;
    match sock.family(abi::FAMILY_NAME) {
        Ok((id, groups)) => Ok((sock, id, groups)),
        Err(Error::Kernel(k)) if k.errno == libc::ENOENT => Err(format!(
            "generic netlink family '{}' not found (is the sroce module loaded?)",
            abi::FAMILY_NAME
        )),
        Err(e) => Err(describe("resolving the sroce family", &e)),
    }
}

/// Prints what a `show` found: lines, or one JSON array.
fn print_listing(items: Vec<(String, String)>, json: bool) {
    if json {
        let objects: Vec<String> = items.into_iter().map(|(_, j)| j).collect();
        println!("{}", json::array(&objects));
    } else {
        for (line, _) in items {
            println!("{line}");
        }
    }
}

fn dev_show(dev: Option<&str>, json: bool) -> Result<(), String> {
    let (mut sock, fam) = connect()?;
    let what = match dev {
        Some(d) => format!("dev show {d}"),
        None => "dev show".to_owned(),
    };
    let replies = sock
        .request(
            fam,
            abi::FAMILY_VERSION,
            abi::CMD_DEV_GET,
            dev.is_none(),
            |b| {
                if let Some(d) = dev {
                    b.str(abi::ATTR_DEV_NAME, d)?;
                }
                Ok(())
            },
        )
        .map_err(|e| describe(&what, &e))?;
    let mut items = Vec::new();
    for r in replies {
        let d =
            DevInfo::parse(&r).map_err(|e| format!("{what}: bad reply from the kernel: {e}"))?;
        items.push((d.line(), d.json()));
    }
    print_listing(items, json);
    Ok(())
}

fn dev_set(s: &SetArgs) -> Result<(), String> {
    let (mut sock, fam) = connect()?;
    sock.request(fam, abi::FAMILY_VERSION, abi::CMD_DEV_SET, false, |b| {
        b.str(abi::ATTR_DEV_NAME, &s.dev)?;
        if let Some(n) = s.group_size {
            b.u8(abi::ATTR_GROUP_SIZE, n);
        }
        if let Some(p) = s.policy {
            b.u8(abi::ATTR_POLICY, abi::policy_to_u8(p));
        }
        if let Some((lo, hi)) = s.ports {
            b.u16(abi::ATTR_PORT_MIN, lo).u16(abi::ATTR_PORT_MAX, hi);
        }
        if let Some(g) = s.reorder_guard {
            b.u8(abi::ATTR_REORDER_GUARD, u8::from(g));
        }
        Ok(())
    })
    .map(drop)
    .map_err(|e| describe(&format!("dev set {}", s.dev), &e))
}

fn qp_set(s: &SetArgs, qpn: &str) -> Result<(), String> {
    let qpn: u32 = qpn
        .parse()
        .or_else(|_| u32::from_str_radix(qpn.trim_start_matches("0x"), 16))
        .map_err(|_| format!("qp set: queue pair number '{qpn}' is not a number"))?;
    if s.ports.is_some() {
        return Err("qp set: the port range is per device (dev set)".into());
    }
    let (mut sock, fam) = connect()?;
    sock.request(fam, abi::FAMILY_VERSION, abi::CMD_QP_SET, false, |b| {
        b.str(abi::ATTR_DEV_NAME, &s.dev)?;
        b.attr(abi::ATTR_QPN, &qpn.to_ne_bytes())?;
        if let Some(n) = s.group_size {
            b.u8(abi::ATTR_GROUP_SIZE, n);
        }
        if let Some(p) = s.policy {
            b.u8(abi::ATTR_POLICY, abi::policy_to_u8(p));
        }
        if let Some(g) = s.reorder_guard {
            b.u8(abi::ATTR_REORDER_GUARD, u8::from(g));
        }
        Ok(())
    })
    .map(drop)
    .map_err(|e| describe(&format!("qp set {} {qpn}", s.dev), &e))
}

/// A dump entry `show` lists: its device, its line, its JSON object.
trait Listed: Sized {
    fn parse(payload: &[u8]) -> Result<Self, nl::DecodeError>;
    fn dev(&self) -> &str;
    fn line(&self) -> String;
    fn json(&self) -> String;
}

impl Listed for session::SessionInfo {
    fn parse(payload: &[u8]) -> Result<Self, nl::DecodeError> {
        session::SessionInfo::parse(payload)
    }
    fn dev(&self) -> &str {
        &self.dev
    }
    fn line(&self) -> String {
        session::SessionInfo::line(self)
    }
    fn json(&self) -> String {
        session::SessionInfo::json(self)
    }
}

impl Listed for flow::FlowInfo {
    fn parse(payload: &[u8]) -> Result<Self, nl::DecodeError> {
        flow::FlowInfo::parse(payload)
    }
    fn dev(&self) -> &str {
        &self.dev
    }
    fn line(&self) -> String {
        flow::FlowInfo::line(self)
    }
    fn json(&self) -> String {
        flow::FlowInfo::json(self)
    }
}

/// Dumps `cmd` and prints its entries of device `dev` (all without one);
/// `what` names the command in errors.
fn show_dump<T: Listed>(cmd: u8, what: &str, dev: Option<&str>, json: bool) -> Result<(), String> {
    let (mut sock, fam) = connect()?;
    let replies = sock
        .request(fam, abi::FAMILY_VERSION, cmd, true, |_| Ok(()))
        .map_err(|e| describe(what, &e))?;
    let mut items = Vec::new();
    for r in replies {
        let x = T::parse(&r).map_err(|e| format!("{what}: bad reply from the kernel: {e}"))?;
        if dev.map_or(true, |d| d == x.dev()) {
            items.push((x.line(), x.json()));
        }
    }
    print_listing(items, json);
    Ok(())
}

/// Prints session events until killed.
fn monitor(json: bool) -> Result<(), String> {
    use std::io::Write;
    let (sock, fam, groups) = connect_with_groups()?;
    let group = groups
        .iter()
        .find(|(n, _)| n == abi::MCGRP_EVENTS)
        .map(|(_, id)| *id)
        .ok_or_else(|| {
            format!(
                "the sroce family has no '{}' group (an older module?)",
                abi::MCGRP_EVENTS
            )
        })?;
    sock.join(group)
        .map_err(|e| format!("joining {}: {e}", abi::MCGRP_EVENTS))?;
    let mut out = std::io::stdout();
    // Tells a script the subscription is in place (stderr: stdout carries
    // only events).
    eprintln!("monitoring {}", abi::MCGRP_EVENTS);
    loop {
        let events = match sock.next_events(fam) {
            Ok(ev) => ev,
            // The socket's buffer overran: some events are lost, later
            // ones still come (as with `ip monitor`).
            Err(Error::Io(e)) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                eprintln!("sroce: monitor: events lost (receive buffer overrun)");
                continue;
            }
            Err(e) => return Err(describe("monitor", &e)),
        };
        for e in events {
            let cmd = nl::genl(&e).map(|g| g.cmd).unwrap_or(0);
            if cmd != abi::CMD_SESSION_EVENT {
                continue;
            }
            let s = session::SessionInfo::parse(&e)
                .map_err(|err| format!("monitor: bad event from the kernel: {err}"))?;
            let text = if json {
                s.json()
            } else {
                format!("event {}", s.line())
            };
            if writeln!(out, "{text}").and_then(|()| out.flush()).is_err() {
                return Ok(());
            }
        }
    }
}

fn run(args: &[&str]) -> Result<(), String> {
    let (json, args) = match args {
        ["-j" | "--json", rest @ ..] => (true, rest),
        _ => (false, args),
    };
    match args {
        ["qp", "set", dev, qpn, rest @ ..] => {
            let mut a = vec![*dev];
            a.extend_from_slice(rest);
            qp_set(&parse_set(&a)?, qpn)
        }
        ["session", "show"] | ["session"] => {
            show_dump::<session::SessionInfo>(abi::CMD_SESSION_GET, "session show", None, json)
        }
        ["monitor"] => monitor(json),
        ["flow", "show"] | ["flow"] => {
            show_dump::<flow::FlowInfo>(abi::CMD_RX_FLOW_GET, "flow show", None, json)
        }
        ["flow", "show", dev] => {
            show_dump::<flow::FlowInfo>(abi::CMD_RX_FLOW_GET, "flow show", Some(dev), json)
        }
        ["session", "show", dev] => {
            show_dump::<session::SessionInfo>(abi::CMD_SESSION_GET, "session show", Some(dev), json)
        }
        ["dev", "show"] | ["dev"] => dev_show(None, json),
        ["dev", "show", dev] => dev_show(Some(dev), json),
        ["dev", "set", rest @ ..] => dev_set(&parse_set(rest)?),
        ["help" | "-h" | "--help"] => {
            println!("{USAGE}");
            Ok(())
        }
        _ => Err(format!("bad arguments\n{USAGE}")),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sroce: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_arguments() {
        let s = parse_set(&[
            "sroce1",
            "group-size",
            "8",
            "policy",
            "failover",
            "ports",
            "62000-62999",
            "reorder-guard",
            "off",
        ])
        .unwrap();
        assert_eq!(
            s,
            SetArgs {
                dev: "sroce1".into(),
                group_size: Some(8),
                policy: Some(Policy::Failover),
                ports: Some((62000, 62999)),
                reorder_guard: Some(false),
            }
        );
        assert!(parse_set(&["d", "reorder-guard", "maybe"]).is_err());
        // Range checks are the kernel's: 0 and 65 parse.
        assert_eq!(
            parse_set(&["d", "group-size", "0"]).unwrap().group_size,
            Some(0)
        );
        assert_eq!(
            parse_set(&["d", "ports", "9-1"]).unwrap().ports,
            Some((9, 1))
        );
        for bad in [
            &[][..],
            &["d"],
            &["d", "group-size"],
            &["d", "group-size", "256"],
            &["d", "policy", "random"],
            &["d", "ports", "1"],
            &["d", "ports", "1-70000"],
            &["d", "colour", "red"],
        ] {
            assert!(parse_set(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn device_reply() {
        let mut b = nl::MsgBuilder::new(30, 0, 1, abi::CMD_DEV_GET, 1);
        b.str(abi::ATTR_DEV_NAME, "sroce1").unwrap();
        b.attr(abi::ATTR_IFINDEX, &7u32.to_ne_bytes()).unwrap();
        b.u8(abi::ATTR_GROUP_SIZE, 4)
            .u8(abi::ATTR_POLICY, 2)
            .u16(abi::ATTR_PORT_MIN, 61000)
            .u16(abi::ATTR_PORT_MAX, 65535)
            .u8(99, 0); // unknown attributes are skipped
        let m = b.finish();
        let d = DevInfo::parse(&m[nl::NLMSG_HDRLEN..]).unwrap();
        assert_eq!(
            d.line(),
            "sroce1: ifindex 7 group-size 4 policy least-outstanding ports 61000-65535"
        );
        assert_eq!(
            d.json(),
            r#"{"dev":"sroce1","ifindex":7,"group_size":4,"policy":"least-outstanding","port_min":61000,"port_max":65535}"#
        );
        let mut b = nl::MsgBuilder::new(30, 0, 1, abi::CMD_DEV_GET, 1);
        b.u16(abi::ATTR_GROUP_SIZE, 4);
        let m = b.finish();
        assert!(DevInfo::parse(&m[nl::NLMSG_HDRLEN..]).is_err());
    }

    #[test]
    fn error_text() {
        let e = Error::Kernel(nl::NlError {
            errno: libc::ERANGE,
            msg: Some("port range: need 0 < PORT_MIN <= PORT_MAX".into()),
        });
        assert_eq!(
            describe("dev set sroce1", &e),
            "dev set sroce1: Numerical result out of range (ERANGE): port range: need 0 < PORT_MIN <= PORT_MAX"
        );
        let e = Error::Kernel(nl::NlError {
            errno: libc::EPERM,
            msg: None,
        });
        assert_eq!(
            describe("dev set x", &e),
            "dev set x: Operation not permitted (EPERM): needs CAP_NET_ADMIN"
        );
    }
}
