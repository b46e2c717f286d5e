//! The agents' records in the shared ring ([`crate::ring`]): the two a program
//! makes at every call, a call and an object's change, in a compact binary
//! form its threads write without formatting anything; every other record
//! (rare: who the process is, stacks, device spans, what a framework said, a
//! refused allocation) as its event's JSON line.
//!
//! Decoding trusts nothing: any process of the program can write the ring, so
//! a payload that is short, long, or names a kind or an action no agent sends
//! decodes to `None`, never to a panic.

use crate::api::CallName;
use crate::event::{Call, CallStatus, Event, ObjectAction, ObjectEvent};
use crate::vocab::ObjKind;

/// A call record's kind in the ring.
pub const CALL: u16 = 1;
/// An object record's.
pub const OBJECT: u16 = 2;
/// An event's JSON line (without its newline).
pub const JSON: u16 = 3;

/// A call's result as the API returned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status<'a> {
    OpenCl(i32),
    /// A `CUresult`, and for an error the driver's name for it.
    Cuda {
        code: i32,
        name: Option<&'a str>,
    },
}

/// One call that returned to the program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRecord<'a> {
    pub seq: u64,
    pub thread: u64,
    pub api: &'a str,
    /// The entry point the driver exports (`cuMemAlloc_v2`).
    pub driver: &'a str,
    pub begin_ns: u64,
    pub end_ns: u64,
    pub status: Status<'a>,
    pub object: Option<u64>,
    pub memory_step: Option<i64>,
    /// A free of device memory no allocation the agent saw made
    /// ([`crate::Call::freed_unseen`]).
    pub freed_unseen: bool,
}

/// One change of an object's life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRecord {
    pub t_ns: u64,
    pub id: u64,
    pub kind: ObjKind,
    pub action: ObjectAction,
    pub bytes: u64,
    pub refcount: u32,
    pub stack: Option<u64>,
    pub refs: Vec<u64>,
}

const ACTIONS: [ObjectAction; 6] = [
    ObjectAction::Created,
    ObjectAction::Retained,
    ObjectAction::Released,
    ObjectAction::Forgotten,
    ObjectAction::Destroyed,
    ObjectAction::CleanedUp,
];

/// The longest name a call record carries (longer ones are cut).
const NAME_CAP: usize = 255;

impl CallRecord<'_> {
    /// Appends the record to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        for v in [self.seq, self.thread, self.begin_ns, self.end_ns] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        let (api_kind, code, name) = match self.status {
            Status::OpenCl(code) => (1u8, code, ""),
            Status::Cuda { code, name } => (2u8, code, name.unwrap_or("")),
        };
        let flags = u8::from(self.object.is_some())
            | (u8::from(self.memory_step.is_some()) << 1)
            | (u8::from(self.freed_unseen) << 2);
        out.extend_from_slice(&[api_kind, flags]);
        out.extend_from_slice(&code.to_le_bytes());
        out.extend_from_slice(&self.object.unwrap_or(0).to_le_bytes());
        out.extend_from_slice(&self.memory_step.unwrap_or(0).to_le_bytes());
        for s in [self.api, self.driver, name] {
            let s = cut(s);
            out.push(s.len() as u8);
            out.extend_from_slice(s.as_bytes());
        }
    }
}

impl<'a> CallRecord<'a> {
    pub fn decode(bytes: &'a [u8]) -> Option<CallRecord<'a>> {
        let mut r = Reader(bytes);
        let (seq, thread, begin_ns, end_ns) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?);
        let (api_kind, flags) = (r.u8()?, r.u8()?);
        let code = i32::from_le_bytes(r.take(4)?.try_into().ok()?);
        let object = r.u64()?;
        let memory_step = r.u64()? as i64;
        let (api, driver, name) = (r.str()?, r.str()?, r.str()?);
        if !r.0.is_empty() || flags > 7 {
            return None;
        }
        let status = match api_kind {
            1 if name.is_empty() => Status::OpenCl(code),
            2 => Status::Cuda {
                code,
                name: (!name.is_empty()).then_some(name),
            },
            _ => return None,
        };
        Some(CallRecord {
            seq,
            thread,
            api,
            driver,
            begin_ns,
            end_ns,
            status,
            object: (flags & 1 != 0).then_some(object),
            memory_step: (flags & 2 != 0).then_some(memory_step),
            freed_unseen: flags & 4 != 0,
        })
    }

    /// The call event of process `pid`.
    pub fn into_event(self, pid: u32) -> Event {
        Event::Call(Call {
            seq: self.seq,
            pid,
            thread: self.thread,
            api: CallName::from(self.api),
            driver: self.driver.to_string(),
            begin_ns: self.begin_ns,
            end_ns: self.end_ns,
            status: call_status(self.status),
            object: self.object,
            memory_step: self.memory_step,
            freed_unseen: self.freed_unseen,
            returned: None,
            ..Call::default()
        })
    }
}

/// A call's status as the stream says it: named from the OpenCL vocabulary or
/// by the CUDA driver.
pub fn call_status(status: Status<'_>) -> CallStatus {
    match status {
        Status::OpenCl(0) | Status::Cuda { code: 0, .. } => CallStatus::Ok,
        Status::OpenCl(code) => CallStatus::Error {
            code: i64::from(code),
            name: crate::vocab::opencl_status_name(code)
                .map_or_else(|| format!("CL_UNKNOWN_ERROR_{code}"), str::to_string),
        },
        Status::Cuda { code, name } => CallStatus::Error {
            code: i64::from(code),
            name: name.map_or_else(|| format!("CUDA_ERROR_{code}"), str::to_string),
        },
    }
}

impl ObjectRecord {
    pub fn encode(&self, out: &mut Vec<u8>) {
        for v in [self.t_ns, self.id, self.bytes, self.stack.unwrap_or(0)] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.refcount.to_le_bytes());
        let kind = ObjKind::ALL
            .iter()
            .position(|k| *k == self.kind)
            .unwrap_or(0);
        let action = ACTIONS.iter().position(|a| *a == self.action).unwrap_or(0);
        out.extend_from_slice(&[kind as u8, action as u8, u8::from(self.stack.is_some()), 0]);
        for r in &self.refs {
            out.extend_from_slice(&r.to_le_bytes());
        }
    }

    pub fn decode(bytes: &[u8]) -> Option<ObjectRecord> {
        let mut r = Reader(bytes);
        let (t_ns, id, size, stack) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?);
        let refcount = u32::from_le_bytes(r.take(4)?.try_into().ok()?);
        let [kind, action, has_stack, _] = r.take(4)?.try_into().ok()?;
        if r.0.len() % 8 != 0 || has_stack > 1 {
            return None;
        }
        let mut refs = Vec::with_capacity(r.0.len() / 8);
        while !r.0.is_empty() {
            refs.push(r.u64()?);
        }
        Some(ObjectRecord {
            t_ns,
            id,
            kind: *ObjKind::ALL.get(usize::from(kind))?,
            action: *ACTIONS.get(usize::from(action))?,
            bytes: size,
            refcount,
            stack: (has_stack == 1).then_some(stack),
            refs,
        })
    }

    pub fn into_event(self) -> Event {
        Event::Object(ObjectEvent {
            t_ns: self.t_ns,
            id: self.id,
            kind: self.kind,
            action: self.action,
            handle: None,
            bytes: self.bytes,
            refcount: self.refcount,
            refs: self.refs,
            line: None,
            stack: self.stack,
        })
    }
}

/// `s`, cut at a character boundary to [`NAME_CAP`] bytes.
fn cut(s: &str) -> &str {
    if s.len() <= NAME_CAP {
        return s;
    }
    let mut end = NAME_CAP;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn str(&mut self) -> Option<&'a str> {
        let n = usize::from(self.u8()?);
        std::str::from_utf8(self.take(n)?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> CallRecord<'static> {
        CallRecord {
            seq: 5,
            thread: 9,
            api: "cudaMalloc",
            driver: "cuMemAlloc_v2",
            begin_ns: 100,
            end_ns: 250,
            status: Status::Cuda {
                code: 2,
                name: Some("CUDA_ERROR_OUT_OF_MEMORY"),
            },
            object: Some(1 << 40),
            memory_step: Some(-4096),
            freed_unseen: false,
        }
    }

    #[test]
    fn calls_and_objects_come_back_as_they_went() {
        let mut out = Vec::new();
        call().encode(&mut out);
        assert_eq!(CallRecord::decode(&out), Some(call()));
        let unseen = CallRecord {
            object: None,
            freed_unseen: true,
            ..call()
        };
        out.clear();
        unseen.encode(&mut out);
        assert_eq!(CallRecord::decode(&out), Some(unseen));
        let plain = CallRecord {
            status: Status::OpenCl(-5),
            object: None,
            memory_step: None,
            ..call()
        };
        out.clear();
        plain.encode(&mut out);
        assert_eq!(CallRecord::decode(&out), Some(plain.clone()));
        let Event::Call(c) = plain.into_event(77) else {
            panic!("a call")
        };
        assert_eq!((c.pid, c.api.as_str()), (77, "cudaMalloc"));
        assert!(
            matches!(c.status, CallStatus::Error { code: -5, ref name } if name == "CL_OUT_OF_RESOURCES")
        );
        for kind in ObjKind::ALL {
            for action in ACTIONS {
                let o = ObjectRecord {
                    t_ns: 1,
                    id: 2,
                    kind,
                    action,
                    bytes: 3,
                    refcount: 4,
                    stack: (kind == ObjKind::Buffer).then_some(6),
                    refs: vec![7, 8],
                };
                out.clear();
                o.encode(&mut out);
                assert_eq!(ObjectRecord::decode(&out), Some(o));
            }
        }
    }

    #[test]
    fn any_bytes_decode_to_a_record_or_to_nothing() {
        let mut out = Vec::new();
        call().encode(&mut out);
        // Every prefix, every byte changed: never a panic.
        for n in 0..out.len() {
            assert_eq!(CallRecord::decode(&out[..n]), None);
            let mut bad = out.clone();
            bad[n] ^= 0xFF;
            let _ = CallRecord::decode(&bad);
            let _ = ObjectRecord::decode(&bad);
        }
        let mut seed = 1u64;
        for _ in 0..20_000 {
            let bytes: Vec<u8> = (0..(seed % 90) as usize)
                .map(|_| {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    (seed >> 56) as u8
                })
                .collect();
            let _ = CallRecord::decode(&bytes);
            let _ = ObjectRecord::decode(&bytes);
        }
    }
}
