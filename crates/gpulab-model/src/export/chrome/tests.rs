//! The Chrome trace's unit tests: small streams, each about one rule of the
//! trace (flows, object lives, tracks, nesting).

use super::*;
use crate::trace::{Call, DeviceSpan, End, EndStatus, ObjKind, ObjectAction, ObjectEvent};

fn call(seq: u64) -> Event {
    Event::Call(Call {
        seq,
        pid: 1,
        api: "clEnqueueNDRangeKernel".into(),
        driver: "clEnqueueNDRangeKernel".into(),
        begin_ns: seq * 100,
        end_ns: seq * 100 + 10,
        ..Default::default()
    })
}

fn span(call_seq: u64) -> Event {
    Event::DeviceSpan(DeviceSpan {
        queue: 0,
        queue_name: None,
        name: "spin".into(),
        call_seq,
        line: None,
        queued_ns: call_seq * 100,
        begin_ns: call_seq * 100 + 50,
        end_ns: call_seq * 100 + 60,
    })
}

fn object(t_ns: u64, action: ObjectAction, refcount: u32) -> Event {
    Event::Object(ObjectEvent {
        t_ns,
        id: 7,
        kind: ObjKind::Buffer,
        action,
        handle: Some("buf".into()),
        bytes: 64,
        refcount,
        refs: vec![],
        line: None,
        stack: None,
    })
}

fn trace(events: Vec<Event>) -> Vec<serde_json::Value> {
    let each = |f: &mut dyn FnMut(Event)| {
        events.iter().cloned().for_each(f);
        Ok(())
    };
    let mut out = Vec::new();
    Trace::outline(vec![each]).unwrap().write(&mut out).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
    doc["traceEvents"].as_array().cloned().unwrap_or_default()
}

/// What the CUDA pools held at each call is a counter track, as the
/// report's JSON has it: reserved from the device, and used of it.
#[test]
fn cuda_pools_are_counter_tracks() {
    let with_pool = Event::Call(Call {
        seq: 0,
        pid: 1,
        api: "cudaFreeAsync".into(),
        driver: "cuMemFreeAsync".into(),
        begin_ns: 0,
        end_ns: 1_000,
        cuda: Some(crate::trace::CudaMemory {
            pool_reserved: 64 << 20,
            pool_used: 0,
            free: 0,
            total: 0,
            custom_pool: None,
            graph_mem: None,
        }),
        ..Default::default()
    });
    let t = trace(vec![with_pool]);
    let pool: Vec<_> = t
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "CUDA default pool, MiB")
        .collect();
    assert_eq!(pool.len(), 1, "{t:?}");
    assert_eq!(pool[0]["args"]["reserved"], 64.0);
    assert_eq!(pool[0]["args"]["used"], 0.0);
    // No own pool, no graph: no track for them.
    assert!(!t.iter().any(|e| e["name"] == "CUDA own pool, MiB"));
}

/// A launch the device starts before the call returns (a graph launch):
/// its arrow starts inside the call, at or before the work begins, never
/// after it.
#[test]
fn a_flow_never_points_back_in_time() {
    let long = Event::Call(Call {
        seq: 0,
        pid: 1,
        api: "cudaGraphLaunch".into(),
        driver: "cuGraphLaunch".into(),
        begin_ns: 0,
        end_ns: 10_000_000,
        ..Default::default()
    });
    let early = Event::DeviceSpan(DeviceSpan {
        queue: 0,
        queue_name: None,
        name: "spin".into(),
        call_seq: 0,
        line: None,
        queued_ns: 0,
        begin_ns: 1_000_000,
        end_ns: 2_000_000,
    });
    let t = trace(vec![long, early]);
    let at = |ph: &str| {
        t.iter()
            .find(|e| e["cat"] == "flow" && e["ph"] == ph)
            .and_then(|e| e["ts"].as_f64())
            .unwrap()
    };
    assert!(at("s") <= at("f"), "{} after {}", at("s"), at("f"));
    assert!(at("s") >= 0.0);
}

/// A span long after its call, and one before its call, still get their arrows,
/// and the trace stays in time order.
#[test]
fn spans_far_from_their_calls_keep_their_flows() {
    let mut events = vec![call(0)];
    events.extend((1..25_000).map(call));
    events.push(span(0));
    events.push(span(30_000));
    events.push(span(40_000));
    events.push(call(30_000));
    let t = trace(events);
    let flows: Vec<_> = t.iter().filter(|e| e["cat"] == "flow").collect();
    assert_eq!(flows.len(), 4, "{flows:?}");
    let ts = |ph: &str, id: &str| {
        flows
            .iter()
            .find(|e| e["ph"] == ph && e["id"] == id)
            .and_then(|e| e["ts"].as_f64())
    };
    assert_eq!(ts("s", "flow-0"), Some(0.005));
    assert_eq!(ts("f", "flow-0"), Some(0.05));
    assert_eq!(ts("s", "flow-1"), Some(3_000.005));
    // A span whose call never came has no arrow.
    assert_eq!(ts("s", "flow-2"), None);
    let times: Vec<f64> = t.iter().filter_map(|e| e["ts"].as_f64()).collect();
    assert!(times.is_sorted_by(|a, b| a <= b));
}

/// A destructor callback that comes before the release that fired it (a
/// watched program's order) still gives one life: the lab's, then nothing.
#[test]
fn an_objects_life_is_whole_whichever_of_release_and_destroy_comes_first() {
    for order in [[1, 2], [2, 1]] {
        let mut events = vec![object(1_000, ObjectAction::Created, 1)];
        for i in order {
            events.push(match i {
                1 => object(5_000, ObjectAction::Released, 0),
                _ => object(5_000, ObjectAction::Destroyed, 0),
            });
        }
        events.push(Event::End(End {
            t_ns: 9_000,
            status: EndStatus::Finished,
            leaked: vec![],
        }));
        let lives: Vec<_> = trace(events)
            .into_iter()
            .filter(|e| e["ph"] == "b" || e["ph"] == "e")
            .map(|e| (e["ph"].clone(), e["cat"].clone(), e["ts"].clone()))
            .collect();
        let want = |ph: &str, ts: f64| {
            (
                serde_json::json!(ph),
                serde_json::json!("held by the lab"),
                serde_json::json!(ts),
            )
        };
        assert_eq!(lives, vec![want("b", 1.0), want("e", 5.0)], "{order:?}");
    }
}

/// Two calls of one thread whose recorded times partly overlap: the later
/// is drawn whole, its times as recorded, on a track of its own beside
/// its thread's, and the trace says how many were moved.
#[test]
fn a_slice_that_partly_overlaps_another_moves_to_a_track_of_its_own() {
    let at = |seq: u64, begin: u64, end: u64| {
        Event::Call(Call {
            seq,
            pid: 1,
            api: "clFinish".into(),
            driver: "clFinish".into(),
            begin_ns: begin,
            end_ns: end,
            ..Default::default()
        })
    };
    let events = [
        at(0, 0, 100_000),
        at(1, 50_000, 150_000),
        at(2, 60_000, 70_000),
    ];
    let each = |f: &mut dyn FnMut(Event)| {
        events.iter().cloned().for_each(f);
        Ok(())
    };
    let mut out = Vec::new();
    Trace::outline(vec![each]).unwrap().write(&mut out).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let t = doc["traceEvents"].as_array().unwrap();
    let on = |ts: f64| {
        t.iter()
            .find(|e| e["ph"] == "X" && e["ts"] == ts)
            .map(|e| e["tid"].as_u64().unwrap())
            .unwrap()
    };
    assert_eq!(on(0.0), HOST_TID);
    // Inside the first: on the host lane still.
    assert_eq!(on(60.0), HOST_TID);
    let moved = on(50.0);
    assert_ne!(moved, HOST_TID);
    let named = t
        .iter()
        .find(|e| e["ph"] == "M" && e["tid"] == moved)
        .unwrap();
    assert_eq!(named["args"]["name"], "host, overlapping slices 1");
    let slice = t.iter().find(|e| e["ts"] == 50.0).unwrap();
    assert_eq!(slice["dur"], 100.0);
    assert_eq!(slice["args"]["moved_from_tid"], HOST_TID);
    assert_eq!(doc["otherData"]["overlapping_slices_moved"], 1);
}

/// A watched program of two ranks: a process each, named by rank and pid,
/// a track per thread, the program's own process first.
#[test]
fn a_watched_programs_processes_and_threads_are_tracks_of_their_own() {
    let mut meta = crate::testing::meta();
    meta.pid = 10;
    meta.watch = Some(crate::testing::watched("torchrun", 10));
    let attached = |pid: u32, rank: u32| {
        Event::Agent(crate::trace::AgentEvent {
            t_ns: 0,
            pid,
            parent_pid: 10,
            api: "cuda".into(),
            state: crate::trace::AgentState::Attached {
                exe: "/usr/bin/python3.12".into(),
                destruction: vec![],
                rank: Some(crate::trace::Rank {
                    rank,
                    local_rank: None,
                    world_size: Some(2),
                    from: "RANK".into(),
                }),
            },
        })
    };
    let call = |pid: u32, thread: u64, begin: u64| {
        Event::Call(Call {
            pid,
            thread,
            api: "cudaMalloc".into(),
            driver: "cuMemAlloc_v2".into(),
            begin_ns: begin,
            end_ns: begin + 1_000,
            ..Default::default()
        })
    };
    let t = trace(vec![
        Event::Meta(Box::new(meta)),
        attached(11, 0),
        attached(12, 1),
        call(11, 11, 100),
        call(12, 12, 500),
        call(12, 40, 600),
    ]);
    let name = |what: &str, pid: u64, tid: u64| {
        t.iter()
            .find(|e| e["ph"] == "M" && e["name"] == what && e["pid"] == pid && e["tid"] == tid)
            .and_then(|e| e["args"]["name"].as_str())
            .map(str::to_string)
    };
    assert_eq!(
        name("process_name", 11, 0).as_deref(),
        Some("rank 0 (pid 11) · python3.12")
    );
    assert_eq!(
        name("process_name", 12, 0).as_deref(),
        Some("rank 1 (pid 12) · python3.12")
    );
    assert!(name("process_name", 10, 0).is_some_and(|n| n.contains("(pid 10)")));
    assert_eq!(
        name("thread_name", 12, 12).as_deref(),
        Some("thread 12 (main)")
    );
    assert_eq!(name("thread_name", 12, 40).as_deref(), Some("thread 40"));
    let calls: Vec<(u64, u64)> = t
        .iter()
        .filter(|e| e["cat"] == "call")
        .map(|e| (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()))
        .collect();
    assert_eq!(calls, [(11, 11), (12, 12), (12, 40)]);
    let sort = |pid: u64| {
        t.iter()
            .find(|e| e["name"] == "process_sort_index" && e["pid"] == pid)
            .and_then(|e| e["args"]["sort_index"].as_u64())
    };
    assert!(sort(10) < sort(11) && sort(11) < sort(12));
}

/// A watched program's object carries the stack that made it, its Python
/// line first, as the report says each frame.
#[test]
fn an_objects_life_says_where_it_was_made() {
    let frames = vec![
        crate::trace::Frame {
            module: String::new(),
            address: 0,
            build_id: None,
            function: Some("activations".into()),
            location: Some("/home/u/train.py:21".into()),
            python: true,
        },
        crate::trace::Frame {
            module: "/venv/torch/lib/libc10_cuda.so".into(),
            address: 0x10,
            build_id: None,
            function: Some("alloc_block".into()),
            location: None,
            python: false,
        },
    ];
    let named = Event::Stack(crate::trace::Stack {
        t_ns: 500,
        id: 42,
        frames,
    });
    let mut made = object(1_000, ObjectAction::Created, 1);
    if let Event::Object(o) = &mut made {
        o.stack = Some(42);
    }
    let t = trace(vec![named, made]);
    let begins: Vec<_> = t.iter().filter(|e| e["ph"] == "b").collect();
    assert_eq!(
        begins[0]["args"]["made_at"],
        serde_json::json!([
            "activations (/home/u/train.py:21)",
            "alloc_block in libc10_cuda.so"
        ])
    );
}
