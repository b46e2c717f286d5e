use super::{HeldObject, WatchReport, md_code};
use crate::run::{OPENCL_SET_UP, Run};
use crate::trace::{AgentEvent, AgentState, Event, Note, NoteLevel, ObjKind};

fn note(text: String) -> Event {
    Event::Note(Note {
        t_ns: 1,
        level: NoteLevel::Info,
        text,
        line: None,
    })
}

fn attached(api: &str) -> Event {
    Event::Agent(AgentEvent {
        t_ns: 2,
        pid: 7,
        parent_pid: 1,
        api: api.into(),
        state: AgentState::Attached {
            exe: "app".into(),
            destruction: Vec::new(),
            rank: None,
        },
    })
}

/// What the agent read inside a refused allocation leads the report: the
/// size asked, who called the driver and from where, the driver's free
/// memory then; `--oom FILE` holds the same moment.
#[test]
fn a_refused_allocation_says_its_size_its_caller_and_the_free_memory() {
    use crate::trace::{Call, CallName, CallStatus, Frame, Refusal, Stack};
    let stack = (7u64 << 32) | 1;
    let frame = Frame {
        module: "/venv/torch/lib/libc10_cuda.so".into(),
        address: 0x1234,
        build_id: None,
        function: Some("c10::cuda::alloc_block".into()),
        location: None,
        python: false,
    };
    let refused = Event::Call(Call {
        seq: 0,
        pid: 7,
        thread: 7,
        line: None,
        iter: Vec::new(),
        tag: None,
        api: CallName::verbatim("cuMemAlloc"),
        driver: "cuMemAlloc_v2".into(),
        begin_ns: 10,
        end_ns: 20,
        status: CallStatus::Error {
            code: 2,
            name: "CUDA_ERROR_OUT_OF_MEMORY".into(),
        },
        expect_error: false,
        mem_before: None,
        mem_after: None,
        object: None,
        cuda: None,
        memory_step: None,
        refused: Some(Box::new(Refusal {
            asked_bytes: Some(8 << 30),
            free_bytes: Some(3 << 30),
            stack: Some(stack),
        })),
        freed_unseen: false,
        returned: None,
    });
    let named = Event::Stack(Stack {
        t_ns: 5,
        id: stack,
        frames: vec![frame.clone()],
    });
    let run = Run::from_events(&[attached("cuda"), named, refused]);
    let report = WatchReport::from_run(&run);
    let r = report.ran_out.as_ref().expect("a refusal");
    assert_eq!(
        (r.asked_bytes, r.driver_free_bytes, r.owner.as_deref()),
        (Some(8 << 30), Some(3 << 30), Some("pytorch"))
    );
    assert_eq!(r.backtrace, vec![frame]);
    let text = report.text();
    let lead: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("ran out of memory"))
        .take(3)
        .collect();
    assert!(
        lead[0].starts_with("ran out of memory: cuMemAlloc of 8192.0 MiB, through PyTorch"),
        "{text}"
    );
    assert!(lead[1].contains("c10::cuda::alloc_block"), "{text}");
    assert!(lead[2].contains("3072.0 MiB free right after"), "{text}");
    let oom = serde_json::to_value(report.out_of_memory()).expect("json");
    assert_eq!(oom["ran_out"]["asked_bytes"], 8u64 << 30);
    assert!(oom["framework_refused"].is_null());
}

/// A Python frame of `/home/u/train.py`, at line `n` of `activations`.
fn train_line(n: u32) -> crate::trace::Frame {
    crate::trace::Frame {
        module: String::new(),
        address: 0,
        build_id: None,
        function: Some("activations".into()),
        location: Some(format!("/home/u/train.py:{n}")),
        python: true,
    }
}

fn alloc_block() -> crate::trace::Frame {
    crate::trace::Frame {
        module: "/venv/torch/lib/libc10_cuda.so".into(),
        address: 0x1234,
        build_id: None,
        function: Some("c10::cuda::CUDACachingAllocator::Native::alloc_block".into()),
        location: None,
        python: false,
    }
}

/// A PyTorch process (pid 7) that made 4 buffers of 64 MiB at line 16, 3 of
/// 32 and 3 of 96 MiB at lines 21 and 22 (and one at 21 it freed), was
/// refused at line 22, then made another and was refused again.
fn refused_at_line_22() -> Vec<Event> {
    use crate::trace::{FrameworkEvent, FrameworkSaid, ObjKind, ObjectAction, ObjectEvent, Stack};
    use gpulab_events::Framework;
    let mut events = vec![attached("cuda")];
    for n in [16u32, 21, 22] {
        events.push(Event::Stack(Stack {
            t_ns: 3,
            id: (7 << 32) | u64::from(n),
            frames: vec![train_line(n), alloc_block()],
        }));
    }
    let mut id = 100u64;
    let mut object = |t_ns: u64, action: ObjectAction, at: u32, mib: u64, refcount: u32| {
        if action == ObjectAction::Created {
            id += 1;
        }
        Event::Object(ObjectEvent {
            t_ns,
            id: (7 << 32) | id,
            kind: ObjKind::Buffer,
            action,
            handle: None,
            bytes: mib << 20,
            refcount,
            refs: Vec::new(),
            line: None,
            stack: Some((7 << 32) | u64::from(at)),
        })
    };
    for _ in 0..4 {
        events.push(object(10, ObjectAction::Created, 16, 64, 1));
    }
    for _ in 0..3 {
        events.push(object(11, ObjectAction::Created, 21, 32, 1));
        events.push(object(12, ObjectAction::Created, 22, 96, 1));
    }
    events.push(object(13, ObjectAction::Created, 21, 32, 1));
    events.push(object(14, ObjectAction::Released, 21, 32, 0));
    let refused = |t_ns: u64| {
        Event::Framework(FrameworkEvent {
            t_ns,
            pid: 7,
            framework: Framework::Pytorch,
            device: 0,
            said: FrameworkSaid::Refused {
                asked: 96 << 20,
                free: 1 << 30,
                limit: 3 << 30,
                stack: Some((7 << 32) | 22),
            },
        })
    };
    events.push(refused(20));
    events.push(object(30, ObjectAction::Created, 16, 64, 1));
    events.push(refused(40));
    events
}

/// A framework's refusal names the line of the program's own code that asked
/// (the hook's observer runs on that thread) and what the process held then,
/// by the line whose allocation made each piece: what it had released before
/// and what it made after (the program caught the refusal and went on, to a
/// second one) are not in it.
#[test]
fn a_framework_refusal_names_the_asking_line_and_what_each_line_held_then() {
    let report = WatchReport::from_run(&Run::from_events(&refused_at_line_22()));
    let f = report.framework_refused.as_ref().expect("a refusal");
    assert_eq!(f.backtrace, vec![train_line(22), alloc_block()]);
    let held: Vec<(u64, u64, Option<String>)> = f
        .held_then
        .iter()
        .map(|h| (h.count, h.bytes >> 20, h.backtrace[0].location.clone()))
        .collect();
    assert_eq!(
        held,
        [
            (3, 288, Some("/home/u/train.py:22".into())),
            (4, 256, Some("/home/u/train.py:16".into())),
            (3, 96, Some("/home/u/train.py:21".into())),
        ]
    );
    assert!(f.held_then.iter().all(|h| h.owner == "pytorch"));
    let text = report.text();
    let lead: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("PyTorch refused"))
        .collect();
    assert_eq!(
        lead[1].trim(),
        "asked at activations (/home/u/train.py:22)",
        "{text}"
    );
    let place =
        "3 buffers          288.00 MiB, through PyTorch at activations (/home/u/train.py:22)";
    assert!(lead.iter().any(|l| l.trim() == place), "{text}");
}

/// Where a PyTorch refusal has no look at its tensors, the text says why, and
/// at every moment truly: how to have one without `--torch-history`; with it,
/// that the look has not arrived while the run goes on (PyTorch's first
/// snapshot takes seconds), then that none came; and the tensors once it came.
#[test]
fn a_refusal_without_its_tensors_says_why_at_every_moment() {
    use crate::trace::{
        AliveGroup, AliveMoment, End, EndStatus, FrameworkEvent, FrameworkSaid, Meta, PyLine,
    };
    let note = |history: bool, ended: bool, looked: bool| {
        let mut watch = crate::testing::watched("python3 train.py", 7);
        watch.torch_history = history;
        let mut events = vec![Event::Meta(Box::new(Meta {
            pid: 7,
            watch: Some(watch),
            ..crate::testing::meta()
        }))];
        events.extend(refused_at_line_22());
        if looked {
            events.push(Event::Framework(FrameworkEvent {
                t_ns: 50,
                pid: 7,
                framework: gpulab_events::Framework::Pytorch,
                device: 0,
                said: FrameworkSaid::Alive {
                    moment: AliveMoment::Refused,
                    allocated: 96 << 20,
                    groups: vec![AliveGroup {
                        at: Some(PyLine {
                            file: "/home/u/train.py".into(),
                            line: 22,
                            function: "activations".into(),
                        }),
                        tensors: 1,
                        bytes: 96 << 20,
                    }],
                    other_tensors: 0,
                    other_bytes: 0,
                    took_ns: 10,
                },
            }));
        }
        if ended {
            events.push(Event::End(End {
                t_ns: 60,
                status: EndStatus::Exited { code: 3 },
                leaked: Vec::new(),
            }));
        }
        let report = WatchReport::from_run(&Run::from_events(&events));
        let f = report.framework_refused.expect("a refusal");
        f.tensor_lines().join("\n")
    };
    assert!(note(false, true, false).contains("run with --torch-history"));
    assert!(note(true, false, false).contains("has not arrived yet"));
    assert!(note(true, true, false).contains("no look at the refusal arrived"));
    let looked = note(true, false, true);
    assert!(
        looked.contains("96.00 MiB      1 tensor at activations (/home/u/train.py:22)"),
        "{looked}"
    );
}

/// The modules the CUDA runtime registers for a library's kernels (NCCL
/// links its own copy) and a framework's streams are theirs for the
/// process's life; a module the program's own code loaded and never
/// unloaded, and one with no stack to tell, stay its leaks.
#[test]
fn what_the_runtime_or_a_library_made_for_itself_is_not_the_programs_leak() {
    use super::AliveSection;
    use crate::trace::{Frame, ObjKind, ObjectAction, ObjectEvent, Stack};
    let frame = |module: &str, function: &str| Frame {
        module: module.into(),
        address: 1,
        build_id: None,
        function: Some(function.into()),
        location: None,
        python: false,
    };
    let stacks = [
        (
            1,
            frame("/venv/nccl/lib/libnccl.so.2", "libcudart_static_7585"),
        ),
        (2, frame("/usr/bin/app", "load_kernels")),
        (
            3,
            frame("/venv/torch/lib/libc10_cuda.so", "initSingleStream"),
        ),
        // cuBLAS's and cuDNN's workspaces, kept by their handles.
        (
            4,
            frame(
                "/venv/nvidia/cublas/lib/libcublasLt.so.13",
                "cublasLtCtxInit",
            ),
        ),
        (5, frame("/venv/nvidia/cudnn/lib/libcudnn_graph.so.9", "")),
        // NCCL's buffers live as long as its communicator, which the
        // program should destroy.
        (6, frame("/venv/nccl/lib/libnccl.so.2", "ncclCommInitRank")),
    ];
    let mut events = vec![attached("cuda")];
    for (n, f) in &stacks {
        events.push(Event::Stack(Stack {
            t_ns: 3,
            id: (7 << 32) | n,
            frames: vec![f.clone()],
        }));
    }
    let made = |id: u64, kind: ObjKind, stack: Option<u64>| {
        Event::Object(ObjectEvent {
            t_ns: 4,
            id: (7 << 32) | id,
            kind,
            action: ObjectAction::Created,
            handle: None,
            bytes: u64::from(kind == ObjKind::Buffer) << 20,
            refcount: 1,
            refs: Vec::new(),
            line: None,
            stack: stack.map(|n| (7 << 32) | n),
        })
    };
    events.push(made(10, ObjKind::Program, Some(1)));
    events.push(made(11, ObjKind::Program, Some(2)));
    events.push(made(12, ObjKind::Stream, Some(3)));
    events.push(made(13, ObjKind::Program, None));
    events.push(made(14, ObjKind::Buffer, Some(4)));
    events.push(made(15, ObjKind::Buffer, Some(5)));
    events.push(made(16, ObjKind::Buffer, Some(6)));
    events.push(made(17, ObjKind::Buffer, Some(2)));
    // The process ended with all its records in (its `attached` and eight
    // objects): none of its groups is uncertain.
    events.push(Event::Agent(AgentEvent {
        t_ns: 5,
        pid: 7,
        parent_pid: 1,
        api: "cuda".into(),
        state: AgentState::Detached {
            records: 9,
            dropped: 0,
            coalesced: 0,
            signal: None,
            lost: 0,
            cut: 0,
            observed: None,
        },
    }));
    let report = WatchReport::from_run(&Run::from_events(&events));
    let mut sections: Vec<(ObjKind, String, AliveSection)> = report
        .alive_at_exit
        .iter()
        .map(|g| (g.kind, g.owner.clone(), g.section()))
        .collect();
    sections.sort_by_key(|(k, o, _)| (*k, o.clone()));
    assert_eq!(
        sections,
        [
            (ObjKind::Buffer, "cublas".into(), AliveSection::Runtime),
            (ObjKind::Buffer, "cudnn".into(), AliveSection::Runtime),
            (ObjKind::Buffer, "nccl".into(), AliveSection::Leaked),
            (ObjKind::Buffer, "program".into(), AliveSection::Leaked),
            (ObjKind::Program, "nccl".into(), AliveSection::Runtime),
            (ObjKind::Program, "program".into(), AliveSection::Leaked),
            (ObjKind::Program, "unknown".into(), AliveSection::Leaked),
            (ObjKind::Stream, "pytorch".into(), AliveSection::Runtime),
        ]
    );
}

#[test]
fn the_runtimes_frames_are_its_shared_library_or_its_static_copy() {
    let frame = |module: &str, function: &str| crate::trace::Frame {
        module: module.into(),
        address: 1,
        build_id: None,
        function: Some(function.into()),
        location: None,
        python: false,
    };
    assert!(super::findings::runtime_frame(&frame(
        "/usr/lib/libcudart.so.13",
        "cudaMalloc"
    )));
    assert!(super::findings::runtime_frame(&frame(
        "/usr/bin/app",
        "libcudart_static_7585"
    )));
    assert!(!super::findings::runtime_frame(&frame(
        "/usr/bin/app",
        "main"
    )));
}

#[test]
fn opencl_set_up_is_said_only_to_a_program_that_called_opencl() {
    let set_up = note(format!("{OPENCL_SET_UP}gpulab preloaded a loader"));
    let other = note("the agent was built for CUDA 13".into());
    let cuda = Run::from_events(&[set_up.clone(), other.clone(), attached("cuda")]);
    assert_eq!(
        WatchReport::from_run(&cuda).notes,
        vec!["the agent was built for CUDA 13".to_string()]
    );
    let opencl = Run::from_events(&[set_up, other, attached("opencl")]);
    assert_eq!(WatchReport::from_run(&opencl).notes.len(), 2);
}

#[test]
fn code_spans_hold_backticks_and_table_bars() {
    assert_eq!(md_code("./app", false), "`./app`");
    assert_eq!(md_code("echo `x` | wc", false), "``echo `x` | wc``");
    assert_eq!(md_code("`a|b", true), "`` `a\\|b ``");
}

/// graphMemoryFootprint frees its graphs' 8 allocations with `cudaFree`:
/// the agent never saw them made (a graph's memory nodes allocate at its
/// launch), so they are in no list, and the report says why a leak check
/// that counts them (compute-sanitizer's) differs.
#[test]
fn frees_of_memory_no_agent_saw_made_are_said_with_their_likely_maker() {
    use crate::trace::{Call, CallName, CallStatus, CudaMemory, PoolMemory};
    let free = |seq: u64, freed_unseen: bool, cuda: Option<CudaMemory>| {
        Event::Call(Call {
            seq,
            pid: 7,
            api: CallName::verbatim("cuMemFree"),
            driver: "cuMemFree_v2".into(),
            status: CallStatus::Ok,
            cuda,
            freed_unseen,
            returned: None,
            ..Call::default()
        })
    };
    let graphs = CudaMemory {
        pool_reserved: 0,
        pool_used: 0,
        free: 1 << 30,
        total: 2 << 30,
        custom_pool: None,
        graph_mem: Some(PoolMemory {
            reserved: 512 << 20,
            used: 0,
        }),
    };
    let plain = Run::from_events(&[attached("cuda"), free(0, false, None)]);
    assert_eq!(WatchReport::from_run(&plain).freed_unseen.line(), None);
    let mut events = vec![attached("cuda"), free(0, false, Some(graphs))];
    events.extend((1..=8).map(|seq| free(seq, true, None)));
    let report = WatchReport::from_run(&Run::from_events(&events));
    assert_eq!(report.freed_unseen.count, 8);
    let text = report.text();
    assert!(
        text.contains("freed, never seen made: 8 allocation(s)")
            && text.contains("CUDA graphs' memory nodes")
            && text.contains("compute-sanitizer"),
        "{text}"
    );
    let json = serde_json::to_value(&report).expect("json");
    assert_eq!(json["freed_unseen"]["count"], 8);
}

/// The H200 shared with a process holding 120 GiB (`cuda-oom--shared-card`):
/// the program made four 4 GiB buffers and ran out between two samples.
/// The headline's peak is at least what its objects held at once, the
/// table says why its own peak is lower, and the device's growth counts the
/// free memory the driver said inside the refused call.
#[test]
fn a_peak_no_reading_caught_is_at_least_what_the_objects_held() {
    use crate::trace::{
        Call, CallName, CallStatus, MemorySource, Meta, ObjKind, ObjectAction, ObjectEvent,
        Refusal, Sample,
    };
    const MIB: u64 = 1 << 20;
    let mut meta = Meta {
        pid: 7,
        baseline_bytes: Some(120 * 1024 * MIB),
        watch: Some(crate::testing::watched("./cuda_oom", 7)),
        ..crate::testing::meta()
    };
    meta.device.total_bytes = Some(140 * 1024 * MIB);
    let sample = |t: u64, own: u64| {
        Event::Sample(Sample {
            t_ns: t,
            source: MemorySource::Nvml,
            used_bytes: 120 * 1024 * MIB + own,
            total_bytes: None,
            process_bytes: Some(own),
            others: None,
        })
    };
    let mut events = vec![
        Event::Meta(Box::new(meta)),
        attached("cuda"),
        sample(10, 530 * MIB),
    ];
    for i in 0..4u64 {
        events.push(Event::Object(ObjectEvent {
            t_ns: 20 + i,
            id: (7 << 32) | (i + 1),
            kind: ObjKind::Buffer,
            action: ObjectAction::Created,
            handle: None,
            bytes: 4096 * MIB,
            refcount: 1,
            refs: Vec::new(),
            line: None,
            stack: None,
        }));
    }
    events.push(Event::Call(Call {
        seq: 9,
        pid: 7,
        api: CallName::verbatim("cuMemAlloc"),
        begin_ns: 30,
        end_ns: 31,
        status: CallStatus::Error {
            code: 2,
            name: "CUDA_ERROR_OUT_OF_MEMORY".into(),
        },
        refused: Some(Box::new(Refusal {
            asked_bytes: Some(4096 * MIB),
            free_bytes: Some(2 * 1024 * MIB),
            stack: None,
        })),
        ..Call::default()
    }));
    events.push(sample(40, 530 * MIB));
    let report = WatchReport::from_run(&Run::from_events(&events));
    assert_eq!(report.peak_memory_bytes, Some(16384 * MIB));
    assert!(report.peak_objects_at_ms.is_some());
    assert_eq!(report.peak_device_growth_bytes, Some(18 * 1024 * MIB));
    let text = report.text();
    assert!(text.contains("peak memory: at least 16384.0 MiB"), "{text}");
    assert!(
        text.contains("the table's peak is its highest reading"),
        "{text}"
    );
}

/// 400 forgotten events pinning one queue made one 9,730-character line:
/// past three chains the rest are counted by shape, in a line of bounded
/// length whatever their number.
#[test]
fn many_chains_pinning_an_object_are_summed_by_shape() {
    let held = |pinned_by: Vec<String>| HeldObject {
        id: 1,
        kind: ObjKind::Queue,
        bytes: 0,
        released_ms: 1.0,
        reserve: None,
        pinned_by,
        uncertain: false,
    };
    let few = held(vec!["event #2".into(), "event #3 -> kernel #4".into()]);
    assert_eq!(few.pins_text(), "event #2, event #3 -> kernel #4");
    let mut chains: Vec<String> = (0..398).map(|i| format!("event #{}", 10 + i)).collect();
    chains.insert(1, "event #5 -> kernel #6".into());
    chains.push("event #7 -> kernel #8".into());
    let many = held(chains);
    let text = many.pins_text();
    assert_eq!(
        text,
        "400 chains (398 event, 2 event -> kernel): event #10, event #5 -> kernel #6, \
         event #11, … and 397 more"
    );
    let more = held((0..40_000).map(|i| format!("event #{i}")).collect());
    assert!(more.pins_text().len() < 120, "{}", more.pins_text());
}
