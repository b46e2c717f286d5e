//! The backend against a real platform (PoCL here): skipped with a notice when no
//! platform exists, unless `GPULAB_REQUIRE_OPENCL=1`.

use std::sync::Mutex;

use super::OpenClBackend;
use crate::{Backend, DriverError, Notice, ObjId, Operand, Outcome};
use gpulab_events::api::Api;
use gpulab_host::clock::now_ns;

/// The tests time kernels; running them one at a time keeps them honest on 2 cores.
static SERIAL: Mutex<()> = Mutex::new(());

fn open_or_skip() -> Option<OpenClBackend> {
    match OpenClBackend::open(None) {
        Ok(b) => Some(b),
        Err(e) if super::tests_require_opencl() => panic!("GPULAB_REQUIRE_OPENCL=1 but: {e}"),
        Err(e) => {
            eprintln!("skipped: no OpenCL device ({e})");
            None
        }
    }
}

fn call(
    b: &mut OpenClBackend,
    seq: u64,
    api: Api,
    ops: &[Operand],
    ev: bool,
) -> Result<Outcome, DriverError> {
    b.call(seq, api, ops, ev)
}

fn make(b: &mut OpenClBackend, seq: u64, api: Api, ops: &[Operand]) -> ObjId {
    match call(b, seq, api, ops, false) {
        Ok(Outcome {
            created: Some(id), ..
        }) => id,
        other => panic!("{api:?}: {other:?} (build log: {:?})", b.last_build_log()),
    }
}

fn spans(notices: &[Notice]) -> Vec<(u64, String, f64)> {
    notices
        .iter()
        .filter_map(|n| match n {
            Notice::Span {
                call_seq,
                name,
                begin_ns,
                end_ns,
                ..
            } => Some((*call_seq, name.clone(), (end_ns - begin_ns) as f64 / 1e6)),
            _ => None,
        })
        .collect()
}

fn destroyed(notices: &[Notice], obj: ObjId) -> Option<u64> {
    notices.iter().find_map(|n| match n {
        Notice::Destroyed { obj: o, t_ns } if *o == obj => Some(*t_ns),
        _ => None,
    })
}

#[test]
#[expect(clippy::too_many_lines, reason = "a test: one lab script end to end")]
fn mini_script_reports_spans_destructors_and_refcounts() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut b) = open_or_skip() else { return };
    use Operand::{Bool, Bytes, Kernel, Ms, Obj};
    let ctx = make(&mut b, 1, Api::ClCreateContext, &[]);
    let q = make(&mut b, 2, Api::ClCreateCommandQueue, &[Obj(ctx)]);
    let out = call(
        &mut b,
        3,
        Api::ClCreateBuffer,
        &[Obj(ctx), Bytes(64 << 20)],
        false,
    );
    let buf = match out {
        Ok(Outcome {
            created: Some(id),
            bytes,
            ..
        }) if bytes == 64 << 20 => id,
        other => panic!("clCreateBuffer: {other:?}"),
    };
    let prog = make(
        &mut b,
        4,
        Api::ClCreateProgramWithSource,
        &[Obj(ctx), Kernel("spin".into())],
    );
    assert!(call(&mut b, 5, Api::ClBuildProgram, &[Obj(prog)], false).is_ok());
    let k = make(
        &mut b,
        6,
        Api::ClCreateKernel,
        &[Obj(prog), Kernel("spin".into())],
    );
    // A private event (not bound by the script) and a blocking read, both profiled.
    assert_eq!(
        call(
            &mut b,
            7,
            Api::ClEnqueueNDRangeKernel,
            &[Obj(q), Obj(k), Obj(buf), Ms(5.0)],
            false
        ),
        Ok(Outcome::default())
    );
    assert!(
        call(
            &mut b,
            8,
            Api::ClEnqueueReadBuffer,
            &[Obj(q), Obj(buf), Bool(true)],
            false
        )
        .is_ok()
    );
    let ev = match call(
        &mut b,
        9,
        Api::ClEnqueueNDRangeKernel,
        &[Obj(q), Obj(k), Obj(buf), Ms(100.0)],
        true,
    ) {
        Ok(Outcome {
            created: Some(id), ..
        }) => id,
        other => panic!("enqueue: {other:?}"),
    };
    let t0 = now_ns();
    assert!(call(&mut b, 10, Api::ClReleaseMemObject, &[Obj(buf)], false).is_ok());
    let release_ms = (now_ns() - t0) as f64 / 1e6;
    assert!(call(&mut b, 11, Api::ClFinish, &[Obj(q)], false).is_ok());
    let t_finish = now_ns();
    // Right after clFinish PoCL may still hold an internal reference on the event
    // for a moment (measured: 2 in about half the runs, with or without gpulab's
    // callback registered); it drops it from its own threads. Once the completion
    // callback ran, the count must be exactly the lab's one reference.
    let rc_at_finish = b.event_refcount(ev);
    b.settle(1_000);
    let deadline = now_ns() + 500_000_000;
    while b.event_refcount(ev) != Ok(1) && now_ns() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    println!("CL_EVENT_REFERENCE_COUNT right after clFinish: {rc_at_finish:?}");
    assert_eq!(
        b.event_refcount(ev),
        Ok(1),
        "gpulab or its callback kept a reference"
    );
    assert!(call(&mut b, 12, Api::ClReleaseEvent, &[Obj(ev)], false).is_ok());
    for (seq, api, id) in [
        (13, Api::ClReleaseKernel, k),
        (14, Api::ClReleaseProgram, prog),
        (15, Api::ClReleaseCommandQueue, q),
        (16, Api::ClReleaseContext, ctx),
    ] {
        assert!(call(&mut b, seq, api, &[Obj(id)], false).is_ok(), "{api:?}");
    }
    b.settle(2_000);
    let notices = b.drain();
    let sp = spans(&notices);
    println!("spans {sp:?}; clReleaseMemObject during the kernel took {release_ms:.3} ms");
    let kernel = sp.iter().find(|s| s.0 == 9).map(|s| s.2);
    // Behaviour, not speed: the span exists and is of the right order of
    // magnitude. A CPU device shared with other work runs the calibrated kernel
    // short or long (416 ms for 100 under two other builds on 2 cores); accuracy
    // is what each run's `kernel-took-its-time` claim and docs/benchmarks.md report.
    assert!(
        kernel.is_some_and(|ms| (10.0..=1000.0).contains(&ms)),
        "100 ms kernel took {kernel:?} ms"
    );
    assert!(sp.iter().any(|s| s.0 == 7 && s.1 == "spin"));
    assert!(sp.iter().any(|s| s.0 == 8 && s.1 == "read"));
    assert_eq!(b.private_events_outstanding(), 0);
    let t_buf = destroyed(&notices, buf);
    assert!(
        t_buf.is_some(),
        "no destructor callback for the buffer: {notices:?}"
    );
    assert!(
        destroyed(&notices, ctx).is_some(),
        "no destructor callback for the context"
    );
    if let Some(t) = t_buf {
        println!(
            "buffer destroyed {:.3} ms after clFinish returned",
            (t as f64 - t_finish as f64) / 1e6
        );
    }
    // A span lies on the host clock, inside the script's time.
    if let Some(Notice::Span {
        queued_ns,
        begin_ns,
        end_ns,
        ..
    }) = notices
        .iter()
        .find(|n| matches!(n, Notice::Span { call_seq: 9, .. }))
    {
        assert!(queued_ns <= begin_ns && begin_ns <= end_ns && *end_ns <= t_finish + 1_000_000);
    }
    // Double release: by default it reaches the driver (and may crash the worker,
    // which is the finding); in-process here, the refusal path answers instead.
    b.set_pass_released_handles(false);
    let again = call(&mut b, 17, Api::ClReleaseMemObject, &[Obj(buf)], false);
    assert_eq!(
        again.map_err(|e| e.name),
        Err("CL_INVALID_MEM_OBJECT".to_string())
    );
}

#[test]
fn driver_errors_carry_their_names() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut b) = open_or_skip() else { return };
    let err = call(
        &mut b,
        1,
        Api::ClWaitForEvents,
        &[Operand::Objs(vec![])],
        false,
    );
    assert_eq!(err.map_err(|e| e.name), Err("CL_INVALID_VALUE".into()));
    let ctx = make(&mut b, 2, Api::ClCreateContext, &[]);
    let big = call(
        &mut b,
        3,
        Api::ClCreateBuffer,
        &[Operand::Obj(ctx), Operand::Bytes(0)],
        false,
    );
    assert_eq!(
        big.map_err(|e| e.name),
        Err("CL_INVALID_BUFFER_SIZE".into())
    );
    assert!(
        call(
            &mut b,
            4,
            Api::ClReleaseContext,
            &[Operand::Obj(ctx)],
            false
        )
        .is_ok()
    );
}

#[test]
fn clock_offset_is_known_and_tight() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(b) = open_or_skip() else { return };
    let err = b.clock_error_ns();
    println!(
        "clock: offset {:?} ns, error ±{err:?} ns over {} enqueues ({} conflicts); calibration {:?}",
        b.clock().offset(),
        b.clock().samples(),
        b.clock().conflicts(),
        b.calibration()
    );
    assert!(b.clock().offset().is_some());
    assert!(
        err.is_some_and(|e| e < 1_000_000),
        "clock error bound {err:?} ns"
    );
}

#[test]
fn calibrated_durations_land_near_the_request() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut b) = open_or_skip() else { return };
    use Operand::{Bytes, Kernel, Obj};
    let ctx = make(&mut b, 1, Api::ClCreateContext, &[]);
    let q = make(&mut b, 2, Api::ClCreateCommandQueue, &[Obj(ctx)]);
    let buf = make(&mut b, 3, Api::ClCreateBuffer, &[Obj(ctx), Bytes(1 << 20)]);
    let prog = make(
        &mut b,
        4,
        Api::ClCreateProgramWithSource,
        &[Obj(ctx), Kernel("spin".into())],
    );
    assert!(call(&mut b, 5, Api::ClBuildProgram, &[Obj(prog)], false).is_ok());
    let k = make(
        &mut b,
        6,
        Api::ClCreateKernel,
        &[Obj(prog), Kernel("spin".into())],
    );
    let asks = [50.0, 100.0, 200.0];
    for (i, ms) in asks.iter().enumerate() {
        let ops = [Obj(q), Obj(k), Obj(buf), Operand::Ms(*ms)];
        assert!(
            call(
                &mut b,
                10 + i as u64,
                Api::ClEnqueueNDRangeKernel,
                &ops,
                false
            )
            .is_ok()
        );
        assert!(call(&mut b, 20 + i as u64, Api::ClFinish, &[Obj(q)], false).is_ok());
    }
    b.settle(2_000);
    let sp = spans(&b.drain());
    for (i, ms) in asks.iter().enumerate() {
        let got = sp.iter().find(|s| s.0 == 10 + i as u64).map(|s| s.2);
        println!("asked {ms} ms, got {got:?} ms");
        // Order of magnitude only (see above): a unit mix-up fails, load does not.
        assert!(
            got.is_some_and(|g| (0.1..=10.0).contains(&(g / ms))),
            "asked {ms} ms, got {got:?}"
        );
    }
    for (api, id) in [
        (Api::ClReleaseKernel, k),
        (Api::ClReleaseProgram, prog),
        (Api::ClReleaseMemObject, buf),
        (Api::ClReleaseCommandQueue, q),
        (Api::ClReleaseContext, ctx),
    ] {
        assert!(call(&mut b, 30, api, &[Obj(id)], false).is_ok());
    }
}
