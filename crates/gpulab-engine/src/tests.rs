//! Engine against the scripted fake backend: order of calls, ledger counts, budget,
//! and clean-up after an error mid-script.

use super::Engine;
use super::fake::FakeBackend;
use super::interpreter::{MemoryNow, MemoryReader};
use super::protocol::RunToEnd;
use gpulab_backend::{DriverError, Operand};
use gpulab_events::{CallStatus, EndStatus, Event, ObjectAction};
use gpulab_lab::{Api, Arg, Number, ObjKind, Params, Quantity, Stmt, StmtKind, Unit};

fn stmt(line: u32, kind: StmtKind) -> Stmt {
    Stmt {
        line,
        text: String::new(),
        tag: None,
        expect_error: false,
        stop_on_error: false,
        kind,
    }
}

fn call(line: u32, bind: Option<&str>, api: &str, args: Vec<Arg>) -> Stmt {
    let api = Api::named(api).unwrap_or(Api::ClFinish);
    stmt(
        line,
        StmtKind::Call {
            bind: bind.map(str::to_string),
            api,
            args,
        },
    )
}

fn h(name: &str) -> Arg {
    Arg::Handle(name.into())
}

fn q(v: f64, unit: Unit) -> Arg {
    Arg::Quantity(Quantity {
        value: Number::Lit(v),
        unit,
    })
}

fn setup() -> Vec<Stmt> {
    vec![
        call(1, Some("ctx"), "clCreateContext", vec![]),
        call(2, Some("q"), "clCreateCommandQueue", vec![h("ctx")]),
        call(
            3,
            Some("buf"),
            "clCreateBuffer",
            vec![h("ctx"), q(64.0, Unit::MiB)],
        ),
        call(
            4,
            Some("prog"),
            "clCreateProgramWithSource",
            vec![h("ctx"), Arg::Kernel("spin".into())],
        ),
        call(5, None, "clBuildProgram", vec![h("prog")]),
        call(
            6,
            Some("k"),
            "clCreateKernel",
            vec![h("prog"), Arg::Kernel("spin".into())],
        ),
    ]
}

fn teardown() -> Vec<Stmt> {
    vec![
        call(20, None, "clReleaseKernel", vec![h("k")]),
        call(21, None, "clReleaseProgram", vec![h("prog")]),
        call(22, None, "clReleaseCommandQueue", vec![h("q")]),
        call(23, None, "clReleaseContext", vec![h("ctx")]),
    ]
}

struct Outcome {
    events: Vec<Event>,
    status: EndStatus,
    backend: FakeBackend,
}

fn run_with(script: &[Stmt], backend: FakeBackend, budget: Option<u64>) -> Outcome {
    run_as(script, backend, budget, false)
}

fn run_as(
    script: &[Stmt],
    backend: FakeBackend,
    budget: Option<u64>,
    until_failure: bool,
) -> Outcome {
    // Device memory reads as flat: budget checks fall back to the ledger's bytes.
    let mut flat = || {
        Some(MemoryNow {
            process: 0,
            device: 0,
        })
    };
    run_reading(script, backend, &mut flat, budget, until_failure)
}

fn run_reading(
    script: &[Stmt],
    mut backend: FakeBackend,
    reader: &mut dyn MemoryReader,
    budget: Option<u64>,
    until_failure: bool,
) -> Outcome {
    let mut events = Vec::new();
    let params = Params::new();
    let mut control = RunToEnd;
    let engine = Engine::new(&mut backend, reader, &mut events, &mut control, &params)
        .with_budget(Some(0), budget)
        .until_failure(until_failure);
    let status = engine.run(script);
    Outcome {
        events,
        status,
        backend,
    }
}

fn run(script: &[Stmt]) -> Outcome {
    run_with(script, FakeBackend::new(), None)
}

fn apis(o: &Outcome) -> Vec<Api> {
    o.backend.calls.iter().map(|(a, _)| *a).collect()
}

fn leaked(o: &Outcome) -> Vec<(ObjKind, Option<String>, bool)> {
    match o.events.last() {
        Some(Event::End(end)) => end
            .leaked
            .iter()
            .map(|l| (l.kind, l.handle.clone(), l.forgotten))
            .collect(),
        other => panic!("last event is not end: {other:?}"),
    }
}

#[test]
fn calls_reach_the_backend_in_script_order_with_resolved_operands() {
    let mut script = setup();
    script.push(call(
        7,
        Some("ev"),
        "clEnqueueNDRangeKernel",
        vec![h("q"), h("k"), h("buf"), q(50.0, Unit::Ms)],
    ));
    script.push(call(8, None, "clReleaseMemObject", vec![h("buf")]));
    script.push(call(9, None, "clFinish", vec![h("q")]));
    script.push(call(10, None, "clReleaseEvent", vec![h("ev")]));
    script.extend(teardown());
    let o = run(&script);
    assert_eq!(o.status, EndStatus::Finished);
    assert_eq!(
        apis(&o)[..4],
        [
            Api::ClCreateContext,
            Api::ClCreateCommandQueue,
            Api::ClCreateBuffer,
            Api::ClCreateProgramWithSource
        ]
    );
    let (_, ops) = &o.backend.calls[2];
    assert_eq!(ops[1], Operand::Bytes(64 << 20));
    let (_, ops) = &o.backend.calls[6];
    assert_eq!(ops[3], Operand::Ms(50.0));
    assert!(leaked(&o).is_empty(), "{:?}", leaked(&o));
    // Every call is one event, in order, each with its line.
    let lines: Vec<u32> = o
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Call(c) => c.line,
            _ => None,
        })
        .collect();
    assert_eq!(lines, vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 21, 22, 23]);
    // The kernel's span comes back attached to its line.
    assert!(o.events.iter().any(|e| matches!(e, Event::DeviceSpan(s) if s.line == Some(7) && s.queue_name.as_deref() == Some("q"))));
}

#[test]
fn an_event_refers_to_the_objects_it_was_enqueued_with() {
    let mut script = setup();
    script.push(call(
        7,
        Some("ev"),
        "clEnqueueNDRangeKernel",
        vec![h("q"), h("k"), h("buf"), q(1.0, Unit::Ms)],
    ));
    let o = run(&script);
    let created: Vec<_> = o
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Object(ob) if ob.action == ObjectAction::Created => Some(ob.clone()),
            _ => None,
        })
        .collect();
    let ev = created
        .iter()
        .find(|c| c.kind == ObjKind::Event)
        .expect("event created");
    assert_eq!(ev.refs.len(), 3);
    // Nothing was released: all six objects are reported as leaked, none forgotten.
    assert_eq!(leaked(&o).len(), 6);
    assert!(leaked(&o).iter().all(|(_, _, f)| !f));
}

#[test]
fn unbound_enqueue_leaves_no_event_in_the_ledger() {
    let mut script = setup();
    script.push(call(
        7,
        None,
        "clEnqueueNDRangeKernel",
        vec![h("q"), h("k"), h("buf"), q(1.0, Unit::Ms)],
    ));
    script.push(call(8, None, "clReleaseMemObject", vec![h("buf")]));
    script.extend(teardown());
    let o = run(&script);
    assert!(leaked(&o).is_empty());
}

#[test]
fn forget_is_a_leak_the_report_names() {
    let mut script = setup();
    script.push(call(
        7,
        Some("ev"),
        "clEnqueueNDRangeKernel",
        vec![h("q"), h("k"), h("buf"), q(1.0, Unit::Ms)],
    ));
    script.push(stmt(
        8,
        StmtKind::Forget {
            handle: "ev".into(),
        },
    ));
    script.push(call(9, None, "clReleaseMemObject", vec![h("buf")]));
    script.extend(teardown());
    let o = run(&script);
    assert_eq!(leaked(&o), vec![(ObjKind::Event, Some("ev".into()), true)]);
    // The driver still holds it: gpulab never released it behind the lab's back.
    let ev_id = o
        .events
        .iter()
        .find_map(|e| match e {
            Event::Object(ob) if ob.kind == ObjKind::Event => Some(ob.id),
            _ => None,
        })
        .unwrap();
    assert_eq!(o.backend.driver_refcount(ev_id), 1);
}

#[test]
fn clean_up_gives_host_memory_back_the_way_it_came_and_leaves_device_pointers_to_it() {
    let mut backend = FakeBackend::new();
    backend.fail_at.insert(
        4,
        DriverError {
            code: 2,
            name: "CUDA_ERROR_OUT_OF_MEMORY".into(),
        },
    );
    let script = vec![
        call(1, Some("p"), "malloc", vec![q(1.0, Unit::MiB)]),
        call(2, Some("r"), "cudaHostRegister", vec![q(1.0, Unit::MiB)]),
        call(3, Some("m"), "cudaHostAlloc", vec![q(1.0, Unit::MiB)]),
        call(4, Some("dp"), "cudaHostGetDevicePointer", vec![h("m")]),
        call(5, Some("d"), "cudaMalloc", vec![q(1.0, Unit::MiB)]),
    ];
    let o = run_with(&script, backend, None);
    assert!(matches!(&o.status, EndStatus::Failed { line: Some(5), .. }));
    // Newest first; `dp` is not freed: its memory's free takes it.
    assert_eq!(
        apis(&o)[5..],
        [Api::CudaFreeHost, Api::CudaHostUnregister, Api::Free]
    );
    // …and `dp` went with `m`: nothing leaks.
    assert!(leaked(&o).is_empty(), "{:?}", leaked(&o));
}

#[test]
fn shared_virtual_memory_is_freed_in_its_context_by_its_own_call() {
    let mut backend = FakeBackend::new();
    backend.fail_at.insert(
        5,
        DriverError {
            code: -5,
            name: "CL_OUT_OF_RESOURCES".into(),
        },
    );
    let script = vec![
        call(1, Some("ctx"), "clCreateContext", vec![]),
        call(2, Some("q"), "clCreateCommandQueue", vec![h("ctx")]),
        call(
            3,
            Some("p"),
            "clSVMAlloc",
            vec![h("ctx"), q(4.0, Unit::MiB)],
        ),
        call(
            4,
            Some("s"),
            "clSVMAlloc",
            vec![h("ctx"), q(2.0, Unit::MiB)],
        ),
        call(5, None, "clSVMFree", vec![h("ctx"), h("s")]),
        call(6, None, "clFinish", vec![h("q")]),
    ];
    let o = run_with(&script, backend, None);
    assert!(matches!(&o.status, EndStatus::Failed { line: Some(6), .. }));
    // `s` went at its own free (the ledger let go of it there); the clean-up
    // frees `p` with clSVMFree in the context it was made in, never with
    // clReleaseMemObject, then the queue and the context.
    assert_eq!(
        apis(&o)[6..],
        [
            Api::ClSVMFree,
            Api::ClReleaseCommandQueue,
            Api::ClReleaseContext
        ]
    );
    let (ctx, p) = (o.backend.calls[0].0, &o.backend.calls[6].1);
    assert_eq!(ctx, Api::ClCreateContext);
    assert!(
        matches!(p.as_slice(), [Operand::Obj(c), Operand::Obj(_)] if *c == 1),
        "{p:?}"
    );
    assert!(leaked(&o).is_empty(), "{:?}", leaked(&o));
    assert_eq!(o.backend.memory, 0);
}

#[test]
fn an_error_mid_script_stops_it_and_cleans_up_newest_first() {
    let mut backend = FakeBackend::new();
    backend.fail_at.insert(
        6,
        DriverError {
            code: -5,
            name: "CL_OUT_OF_RESOURCES".into(),
        },
    );
    let mut script = setup();
    script.push(call(
        7,
        None,
        "clEnqueueNDRangeKernel",
        vec![h("q"), h("k"), h("buf"), q(1.0, Unit::Ms)],
    ));
    script.push(call(8, None, "clReleaseMemObject", vec![h("buf")]));
    let o = run_with(&script, backend, None);
    assert!(
        matches!(&o.status, EndStatus::Failed { line: Some(7), error } if error.contains("CL_OUT_OF_RESOURCES"))
    );
    // Line 8 never ran; clean-up released kernel, program, buffer, queue, context.
    assert_eq!(
        apis(&o)[7..],
        [
            Api::ClReleaseKernel,
            Api::ClReleaseProgram,
            Api::ClReleaseMemObject,
            Api::ClReleaseCommandQueue,
            Api::ClReleaseContext
        ]
    );
    assert!(leaked(&o).is_empty());
    assert_eq!(o.backend.memory, 0);
}

#[test]
fn an_expected_error_does_not_stop_the_script() {
    let mut script = setup();
    script.push(call(7, None, "clReleaseMemObject", vec![h("buf")]));
    let mut double = call(8, None, "clReleaseMemObject", vec![h("buf")]);
    double.expect_error = true;
    script.push(double);
    script.extend(teardown());
    let o = run(&script);
    assert_eq!(o.status, EndStatus::Finished);
    let err = o.events.iter().find_map(|e| match e {
        Event::Call(c) if c.line == Some(8) => Some(c.status.clone()),
        _ => None,
    });
    assert!(
        matches!(err, Some(CallStatus::Error { ref name, .. }) if name == "CL_INVALID_MEM_OBJECT")
    );
}

#[test]
fn the_budget_stops_a_leaking_loop_and_says_so() {
    let mut body = vec![call(
        3,
        Some("buf"),
        "clCreateBuffer",
        vec![h("ctx"), q(1.0, Unit::MiB)],
    )];
    body.push(stmt(
        4,
        StmtKind::Forget {
            handle: "buf".into(),
        },
    ));
    let script = vec![
        call(1, Some("ctx"), "clCreateContext", vec![]),
        Stmt {
            tag: Some("loop".into()),
            ..stmt(
                2,
                StmtKind::Repeat {
                    count: Quantity {
                        value: Number::Lit(100.0),
                        unit: Unit::None,
                    },
                    body,
                },
            )
        },
        call(9, None, "clReleaseContext", vec![h("ctx")]),
    ];
    let o = run_with(&script, FakeBackend::new(), Some(10 << 20));
    assert_eq!(o.status, EndStatus::Finished);
    let block = o.events.iter().find_map(|e| match e {
        Event::Block(b) => Some(b.clone()),
        _ => None,
    });
    let block = block.expect("block event");
    assert_eq!((block.iterations, block.planned), (10, 100));
    assert!(
        o.events
            .iter()
            .any(|e| matches!(e, Event::Note(n) if n.text.contains("budget")))
    );
    // The line after the loop still ran.
    assert_eq!(apis(&o).last(), Some(&Api::ClReleaseContext));
}

#[test]
fn iterations_are_recorded_on_each_call() {
    let body = vec![call(30, None, "clFinish", vec![h("q")])];
    let mut script = setup();
    script.push(stmt(
        7,
        StmtKind::Repeat {
            count: Quantity {
                value: Number::Lit(3.0),
                unit: Unit::None,
            },
            body,
        },
    ));
    let o = run(&script);
    let iters: Vec<Vec<u32>> = o
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Call(c) if c.line == Some(30) => Some(c.iter.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(iters, vec![vec![0], vec![1], vec![2]]);
}

#[test]
fn where_errors_do_not_end_a_run_stop_on_error_still_does() {
    let failing = || {
        let mut b = FakeBackend::new();
        b.errors_end_run = false;
        b.fail_at.insert(
            3,
            DriverError {
                code: 1,
                name: "CUDA_ERROR_INVALID_VALUE".into(),
            },
        );
        b
    };
    let mut script = setup();
    script.push(call(7, None, "clFinish", vec![h("q")]));
    // Without the marker the error is a finding and the lab goes on.
    let o = run_with(&script, failing(), None);
    assert_eq!(o.status, EndStatus::Finished);
    assert_eq!(apis(&o).last(), Some(&Api::ClFinish));
    assert!(
        o.events
            .iter()
            .any(|e| matches!(e, Event::Note(n) if n.line == Some(4)))
    );
    // With `# stop-on-error` on the failing line the script ends there.
    script[3].stop_on_error = true;
    let o = run_with(&script, failing(), None);
    assert!(
        matches!(&o.status, EndStatus::Failed { line: Some(4), .. }),
        "{:?}",
        o.status
    );
    assert!(!apis(&o).contains(&Api::ClFinish));
    // With --until-failure the first refusal ends the run: it is the finding
    // (on the H100 a refused cudaMalloc left the context usable, and a 1,000-
    // iteration loop went on failing 981 times).
    script[3].stop_on_error = false;
    let o = run_as(&script, failing(), None, true);
    assert!(
        matches!(&o.status, EndStatus::Failed { line: Some(4), .. }),
        "{:?}",
        o.status
    );
    assert!(!apis(&o).contains(&Api::ClFinish));
}

/// A driver without destructor callbacks (CUDA) is not waited for at the end of a
/// run: the run ends after as many drains as one whose destructions were all
/// reported, instead of polling until the wait's deadline (250 ms every CUDA run).
#[test]
fn a_driver_without_destructor_callbacks_is_not_waited_for() {
    let mut script = setup();
    script.push(call(8, None, "clReleaseMemObject", vec![h("buf")]));
    script.extend(teardown());
    let reported = run(&script);
    let mut silent = FakeBackend::new();
    silent.destruction = Vec::new();
    let silent = run_with(&script, silent, None);
    assert_eq!(reported.status, EndStatus::Finished);
    assert_eq!(silent.status, EndStatus::Finished);
    assert_eq!(
        silent.backend.drains_after_last_call,
        reported.backend.drains_after_last_call
    );
}

/// A launch's operands follow its kernel: `spin2`'s two buffers, then its
/// duration; the bound event refers to both buffers (the kernel holds both).
/// `clSetKernelArg`'s index reaches the backend as an index, not a duration.
#[test]
fn a_two_buffer_launch_and_a_kernel_argument_reach_the_backend() {
    let mut script = setup();
    script.push(call(
        7,
        Some("b2"),
        "clCreateBuffer",
        vec![h("ctx"), q(1.0, Unit::MiB)],
    ));
    script.push(call(
        8,
        Some("ev"),
        "clEnqueueNDRangeKernel",
        vec![h("q"), h("k"), h("buf"), h("b2"), q(40.0, Unit::Ms)],
    ));
    script.push(call(
        9,
        None,
        "clSetKernelArg",
        vec![h("k"), q(1.0, Unit::None), h("b2")],
    ));
    let o = run(&script);
    // The fake numbers objects as they are made: ctx 1, q 2, buf 3, prog 4, k 5, b2 6.
    let (buf, b2) = (Operand::Obj(3), Operand::Obj(6));
    let (api, ops) = &o.backend.calls[7];
    assert_eq!(*api, Api::ClEnqueueNDRangeKernel);
    assert_eq!(ops[2..], [buf, b2.clone(), Operand::Ms(40.0)]);
    let (api, ops) = &o.backend.calls[8];
    assert_eq!(*api, Api::ClSetKernelArg);
    assert_eq!(ops[..], [Operand::Obj(5), Operand::Index(1), b2]);
    let ev = o
        .events
        .iter()
        .find_map(|e| match e {
            Event::Object(ob) if ob.kind == ObjKind::Event => Some(ob.clone()),
            _ => None,
        })
        .expect("the launch's event");
    assert!(
        ev.refs.contains(&3) && ev.refs.contains(&6),
        "{:?}",
        ev.refs
    );
}

/// A graph's free node hands its allocation's free to the graph: the ledger
/// drops it there, and what the script does not destroy (a graph, its exec)
/// is a leak like any other handle.
#[test]
fn a_free_node_releases_its_allocation_and_graphs_leak_like_handles() {
    let build = vec![
        call(1, Some("s"), "cudaStreamCreate", vec![]),
        call(2, Some("g"), "cudaGraphCreate", vec![]),
        call(
            3,
            Some("a"),
            "cudaGraphAddMemAllocNode",
            vec![h("g"), q(64.0, Unit::MiB)],
        ),
        call(4, None, "cudaGraphAddMemsetNode", vec![h("g"), h("a")]),
        call(5, None, "cudaGraphAddMemFreeNode", vec![h("g"), h("a")]),
        call(6, Some("e"), "cudaGraphInstantiate", vec![h("g")]),
        call(7, None, "cudaGraphLaunch", vec![h("e"), h("s")]),
    ];
    let mut all = build.clone();
    all.extend([
        call(8, None, "cudaGraphExecDestroy", vec![h("e")]),
        call(9, None, "cudaGraphDestroy", vec![h("g")]),
        call(10, None, "cudaStreamDestroy", vec![h("s")]),
    ]);
    let o = run(&all);
    assert_eq!(o.status, EndStatus::Finished);
    assert_eq!(leaked(&o), vec![]);
    let released_at_free_node = o.events.iter().any(|e| {
        matches!(e, Event::Object(ob) if ob.action == ObjectAction::Released
            && ob.handle.as_deref() == Some("a") && ob.line == Some(5))
    });
    assert!(released_at_free_node, "{:?}", o.events);
    let o = run(&build);
    let kinds: Vec<ObjKind> = leaked(&o).into_iter().map(|(k, _, _)| k).collect();
    assert_eq!(
        kinds,
        vec![ObjKind::Stream, ObjKind::Graph, ObjKind::GraphExec]
    );
}

/// A reader that has something to say after its `at`-th reading.
struct Speaks {
    reads: u32,
    at: u32,
    said: bool,
}

impl MemoryReader for Speaks {
    fn read(&mut self) -> Option<MemoryNow> {
        self.reads += 1;
        Some(MemoryNow {
            process: 0,
            device: 0,
        })
    }

    fn take_notes(&mut self) -> Vec<String> {
        if self.reads >= self.at && !self.said {
            self.said = true;
            return vec!["the list disagrees".into()];
        }
        Vec::new()
    }
}

#[test]
fn what_the_memory_reader_says_is_a_warning_on_the_line_it_came_up_in() {
    // Lines read memory before and after: the 6th reading is line 3's after.
    let mut reader = Speaks {
        reads: 0,
        at: 6,
        said: false,
    };
    let o = run_reading(&setup(), FakeBackend::new(), &mut reader, None, false);
    let notes: Vec<_> = o
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Note(n) if n.text == "the list disagrees" => Some((n.level, n.line)),
            _ => None,
        })
        .collect();
    assert_eq!(notes, vec![(gpulab_events::NoteLevel::Warning, Some(3))]);
}
