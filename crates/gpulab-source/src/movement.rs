//! Whether device memory can move without another event telling of it, read
//! from the stream as it passes: what paces the sampler
//! ([`crate::telemetry::Pacer`]). Memory moves at calls (each event brings a
//! reading of its own) and, between them, only where the driver still owes a
//! release: an OpenCL object released but not yet destroyed (its destructor
//! callback has not fired: the driver frees it when the work using it ends),
//! or an object released while device work was queued on a backend that
//! reports no destruction (CUDA's stream-ordered frees), until that work is
//! done.

use std::collections::BTreeSet;

use crate::lab::api::Api;
use crate::trace::{BackendKind, CallStatus, Event, ObjectAction};

#[derive(Debug, Default)]
pub struct Movement {
    backend: Option<BackendKind>,
    /// Calls that queued device work whose span has not come, by seq.
    queued: BTreeSet<u64>,
    /// Objects whose release the driver may still carry out, by id.
    owed: BTreeSet<u64>,
}

impl Movement {
    pub fn saw(&mut self, event: &Event) {
        match event {
            Event::Meta(m) => self.backend = Some(m.backend),
            Event::Call(c)
                if c.status == CallStatus::Ok
                    && c.api.api().is_some_and(Api::queues_device_work) =>
            {
                self.queued.insert(c.seq);
            }
            Event::DeviceSpan(s) => {
                self.queued.remove(&s.call_seq);
                if self.queued.is_empty() && self.backend != Some(BackendKind::OpenCl) {
                    self.owed.clear();
                }
            }
            Event::Object(o) => match o.action {
                ObjectAction::Released if o.refcount == 0 && o.bytes > 0 => {
                    let deferred = match self.backend {
                        Some(BackendKind::OpenCl) => true,
                        _ => !self.queued.is_empty(),
                    };
                    if deferred {
                        self.owed.insert(o.id);
                    }
                }
                ObjectAction::Destroyed => {
                    self.owed.remove(&o.id);
                }
                _ => {}
            },
            Event::End(_) => {
                self.queued.clear();
                self.owed.clear();
            }
            _ => {}
        }
    }

    /// Whether memory can move before the next event.
    pub fn can_move(&self) -> bool {
        !self.owed.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Call, DeviceSpan, ObjKind, ObjectEvent};

    /// What a run's `meta` would have said.
    fn on(backend: BackendKind) -> Movement {
        Movement {
            backend: Some(backend),
            ..Movement::default()
        }
    }

    fn call(seq: u64, api: &str) -> Event {
        Event::Call(Call {
            seq,
            api: api.into(),
            ..Default::default()
        })
    }

    fn object(id: u64, action: ObjectAction) -> Event {
        Event::Object(ObjectEvent {
            t_ns: 0,
            id,
            kind: ObjKind::Buffer,
            action,
            handle: None,
            bytes: 1 << 20,
            refcount: 0,
            refs: Vec::new(),
            line: None,
            stack: None,
        })
    }

    fn span(call_seq: u64) -> Event {
        Event::DeviceSpan(DeviceSpan {
            queue: 1,
            queue_name: None,
            name: "spin".into(),
            call_seq,
            line: None,
            queued_ns: 0,
            begin_ns: 0,
            end_ns: 0,
        })
    }

    #[test]
    fn an_opencl_release_is_owed_until_the_driver_destroys_it() {
        let mut m = on(BackendKind::OpenCl);
        m.saw(&call(1, "clEnqueueNDRangeKernel"));
        assert!(!m.can_move(), "queued work alone moves no memory");
        m.saw(&object(7, ObjectAction::Released));
        assert!(m.can_move());
        m.saw(&span(1));
        assert!(m.can_move(), "OpenCL says when it freed it");
        m.saw(&object(7, ObjectAction::Destroyed));
        assert!(!m.can_move());
    }

    #[test]
    fn a_cuda_release_with_work_queued_is_owed_until_the_work_is_done() {
        let mut m = on(BackendKind::Cuda);
        m.saw(&object(1, ObjectAction::Released));
        assert!(
            !m.can_move(),
            "nothing queued: the free was done in its call"
        );
        m.saw(&call(2, "cudaLaunchKernel"));
        m.saw(&object(3, ObjectAction::Released));
        assert!(m.can_move());
        m.saw(&span(2));
        assert!(!m.can_move());
    }
}
