//! A scripted backend for engine tests: records the calls it gets, fails the ones
//! it is told to, and reports a span for every enqueue.

use std::collections::HashMap;

use gpulab_backend::{
    Backend, DeviceInfo, DeviceKind, DriverError, Notice, ObjId, Operand, Outcome,
};
use gpulab_lab::{Api, Effect, ObjKind};

pub struct FakeBackend {
    info: DeviceInfo,
    next: ObjId,
    kinds: HashMap<ObjId, ObjKind>,
    alive: HashMap<ObjId, u32>,
    pub calls: Vec<(Api, Vec<Operand>)>,
    /// Calls (by order among all calls, from 0) that return this error.
    pub fail_at: HashMap<usize, DriverError>,
    pub memory: u64,
    /// Whether a driver error ends the run (OpenCL's rule) or not (CUDA's).
    pub errors_end_run: bool,
    bytes: HashMap<ObjId, u64>,
    notices: Vec<Notice>,
    /// The kinds whose destruction it reports (all, unless a test says otherwise).
    pub destruction: Vec<ObjKind>,
    /// Drains since the last call: what the end of a run waits after the script.
    pub drains_after_last_call: usize,
}

impl FakeBackend {
    pub fn new() -> Self {
        FakeBackend {
            info: DeviceInfo {
                name: "fake".into(),
                vendor: "gpulab".into(),
                driver_version: "0".into(),
                platform: "fake".into(),
                kind: DeviceKind::Other,
                total_bytes: Some(1 << 34),
                pci_bus_id: None,
            },
            next: 1,
            kinds: HashMap::new(),
            alive: HashMap::new(),
            calls: Vec::new(),
            fail_at: HashMap::new(),
            memory: 0,
            errors_end_run: true,
            bytes: HashMap::new(),
            notices: Vec::new(),
            destruction: ObjKind::ALL.to_vec(),
            drains_after_last_call: 0,
        }
    }

    pub fn driver_refcount(&self, id: ObjId) -> u32 {
        self.alive.get(&id).copied().unwrap_or(0)
    }

    fn new_obj(&mut self, kind: ObjKind, bytes: u64) -> ObjId {
        let id = self.next;
        self.next += 1;
        self.kinds.insert(id, kind);
        self.alive.insert(id, 1);
        self.bytes.insert(id, bytes);
        self.memory += bytes;
        id
    }
}

impl Backend for FakeBackend {
    fn device(&self) -> &DeviceInfo {
        &self.info
    }

    fn call(
        &mut self,
        seq: u64,
        api: Api,
        ops: &[Operand],
        want_event: bool,
    ) -> Result<Outcome, DriverError> {
        let n = self.calls.len();
        self.calls.push((api, ops.to_vec()));
        self.drains_after_last_call = 0;
        if let Some(e) = self.fail_at.get(&n) {
            return Err(e.clone());
        }
        let first = ops.iter().find_map(|o| match o {
            Operand::Obj(id) => Some(*id),
            _ => None,
        });
        match api.effect() {
            Effect::Create(kind) => {
                if api == Api::ClEnqueueNDRangeKernel {
                    self.notices.push(Notice::Span {
                        call_seq: seq,
                        queue: first.unwrap_or(0),
                        name: "spin".into(),
                        queued_ns: 1,
                        begin_ns: 2,
                        end_ns: 3,
                    });
                    if !want_event {
                        return Ok(Outcome::default());
                    }
                }
                let bytes = ops
                    .iter()
                    .find_map(|o| match o {
                        Operand::Bytes(b) => Some(*b),
                        _ => None,
                    })
                    .unwrap_or(0);
                let id = self.new_obj(kind, bytes);
                Ok(Outcome {
                    created: Some(id),
                    bytes,
                    returned: None,
                })
            }
            Effect::Retain(_) => {
                let id = first.unwrap_or(0);
                match self.alive.get_mut(&id) {
                    Some(c) if *c > 0 => {
                        *c += 1;
                        Ok(Outcome::default())
                    }
                    _ => Err(invalid()),
                }
            }
            Effect::Release(_) => {
                let id = first.unwrap_or(0);
                match self.alive.get_mut(&id) {
                    Some(c) if *c > 0 => {
                        *c -= 1;
                        if *c == 0 {
                            self.memory -= self.bytes.get(&id).copied().unwrap_or(0);
                            if self
                                .kinds
                                .get(&id)
                                .is_some_and(|k| self.destruction.contains(k))
                            {
                                self.notices.push(Notice::Destroyed { obj: id, t_ns: 9 });
                            }
                        }
                        Ok(Outcome::default())
                    }
                    _ => Err(invalid()),
                }
            }
            Effect::Use => {
                // A free node, a releasing callback, an SVM free: the object
                // handed over goes, as a release of it would.
                let handed = api.hands_over().and_then(|i| match ops.get(i) {
                    Some(Operand::Obj(id)) => Some(*id),
                    _ => None,
                });
                if let Some(id) = handed {
                    match self.alive.get_mut(&id) {
                        Some(c) if *c > 0 => {
                            *c -= 1;
                            if *c == 0 {
                                self.memory -= self.bytes.get(&id).copied().unwrap_or(0);
                            }
                        }
                        _ => return Err(invalid()),
                    }
                }
                if want_event {
                    let id = self.new_obj(ObjKind::Event, 0);
                    return Ok(Outcome {
                        created: Some(id),
                        bytes: 0,
                        returned: None,
                    });
                }
                Ok(Outcome::default())
            }
        }
    }

    fn error_ends_run(&self, _e: &DriverError) -> bool {
        self.errors_end_run
    }

    fn drain(&mut self) -> Vec<Notice> {
        self.drains_after_last_call += 1;
        std::mem::take(&mut self.notices)
    }

    fn destruction_watched(&self) -> Vec<ObjKind> {
        self.destruction.clone()
    }

    fn settle(&mut self, _timeout_ms: u64) {}
}

fn invalid() -> DriverError {
    DriverError {
        code: -38,
        name: "CL_INVALID_MEM_OBJECT".into(),
    }
}
