//! CUDA graphs: one script line, one driver call (`cuGraph*`). Each node is added
//! after the node the same graph got last (a chain), so a graph runs its nodes in
//! script order. An alloc node's device pointer is the buffer the script names:
//! the driver fixes the address when the node is made and maps memory at launch,
//! from the device's graph memory, which `cuDeviceGraphMemTrim` hands back.

use cudarc::driver::sys;

use super::CudaBackend;
use super::calls::{bytes_at, size};
use crate::{DriverError, Operand, Outcome};
use gpulab_events::ObjKind;
use gpulab_events::api::Api;

fn graph(raw: u64) -> sys::CUgraph {
    raw as usize as sys::CUgraph
}

fn exec(raw: u64) -> sys::CUgraphExec {
    raw as usize as sys::CUgraphExec
}

impl CudaBackend {
    /// The calls of this module; `None` for any other.
    pub(super) fn dispatch_graph(
        &mut self,
        seq: u64,
        api: Api,
        ops: &[Operand],
    ) -> Option<Result<Outcome, DriverError>> {
        Some(match api {
            Api::CudaGraphCreate => self.graph_create(),
            Api::CudaGraphAddMemAllocNode
            | Api::CudaGraphAddMemsetNode
            | Api::CudaGraphAddMemFreeNode => self.graph_node(api, ops),
            Api::CudaGraphInstantiate => self.graph_instantiate(ops),
            Api::CudaGraphLaunch => self.graph_launch(seq, ops),
            Api::CudaGraphExecDestroy => self.graph_exec_destroy(ops),
            Api::CudaGraphDestroy => self.graph_destroy(ops),
            Api::CudaDeviceGraphMemTrim => {
                // SAFETY: this backend's device.
                unsafe { sys::cuDeviceGraphMemTrim(self.dev) }
                    .result()
                    .map(|()| Outcome::default())
                    .map_err(Into::into)
            }
            _ => return None,
        })
    }

    fn graph_create(&mut self) -> Result<Outcome, DriverError> {
        let mut g = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; flags must be 0.
        unsafe { sys::cuGraphCreate(&mut g, 0) }.result()?;
        // From now on the worker reads the device's graph memory after each line.
        self.graphs_made = true;
        Ok(self.created(ObjKind::Graph, g as usize as u64, 0))
    }

    /// Adds one node after graph `ops[0]`'s last node, and makes it the last.
    fn graph_node(&mut self, api: Api, ops: &[Operand]) -> Result<Outcome, DriverError> {
        let (gid, g) = self.raw(ops, 0, ObjKind::Graph)?;
        let tail = self.graph_tail.get(&gid).copied();
        let (deps, n_deps) = match &tail {
            Some(node) => (node as *const sys::CUgraphNode, 1),
            None => (std::ptr::null(), 0),
        };
        let mut node = std::ptr::null_mut();
        let out = match api {
            Api::CudaGraphAddMemAllocNode => {
                let bytes = bytes_at(ops, 1)?;
                // SAFETY: an all-zero CUDA_MEM_ALLOC_NODE_PARAMS is the C idiom
                // (`= {}`): no access descriptors, no export handle, dptr out.
                let mut params: sys::CUDA_MEM_ALLOC_NODE_PARAMS = unsafe { std::mem::zeroed() };
                params.poolProps.allocType =
                    sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
                params.poolProps.location = self.location();
                params.bytesize = size(bytes)?;
                // SAFETY: valid out-pointer, the lab's graph, `deps` names
                // `n_deps` nodes of it; the driver writes the address to `dptr`.
                unsafe {
                    sys::cuGraphAddMemAllocNode(&mut node, graph(g), deps, n_deps, &mut params)
                }
                .result()?;
                let mut out = self.created(ObjKind::Buffer, params.dptr, bytes);
                // The memory is the graph's, mapped at launch: the ledger names
                // the buffer, and the graph memory readings count its bytes.
                out.bytes = 0;
                out
            }
            Api::CudaGraphAddMemsetNode => {
                let (bid, p) = self.raw(ops, 1, ObjKind::Buffer)?;
                let params = sys::CUDA_MEMSET_NODE_PARAMS {
                    dst: p,
                    pitch: 0,
                    value: 0,
                    elementSize: 1,
                    width: size(self.bytes_of(bid))?,
                    height: 1,
                };
                // SAFETY: valid out-pointer and parameters (one row of bytes over
                // the whole buffer), the lab's graph, the backend's context.
                unsafe {
                    sys::cuGraphAddMemsetNode(&mut node, graph(g), deps, n_deps, &params, self.ctx)
                }
                .result()?;
                Outcome::default()
            }
            _ => {
                let (_, p) = self.raw(ops, 1, ObjKind::Buffer)?;
                // SAFETY: valid out-pointer, the lab's graph; an address no alloc
                // node made is the driver's to refuse (CUDA_ERROR_INVALID_VALUE).
                unsafe { sys::cuGraphAddMemFreeNode(&mut node, graph(g), deps, n_deps, p) }
                    .result()?;
                Outcome::default()
            }
        };
        self.graph_tail.insert(gid, node);
        Ok(out)
    }

    fn graph_instantiate(&mut self, ops: &[Operand]) -> Result<Outcome, DriverError> {
        let (_, g) = self.raw(ops, 0, ObjKind::Graph)?;
        let mut e = std::ptr::null_mut();
        // SAFETY: valid out-pointer, the lab's graph; flags 0 (no auto-free on
        // launch: a relaunch with an allocation still live is refused, as in C).
        unsafe { sys::cuGraphInstantiateWithFlags(&mut e, graph(g), 0) }.result()?;
        Ok(self.created(ObjKind::GraphExec, e as usize as u64, 0))
    }

    fn graph_launch(&mut self, seq: u64, ops: &[Operand]) -> Result<Outcome, DriverError> {
        let (_, e) = self.raw(ops, 0, ObjKind::GraphExec)?;
        let (qid, s) = self.raw(ops, 1, ObjKind::Stream)?;
        let stream = s as usize as sys::CUstream;
        self.timed(seq, qid, stream, "graph", None, || {
            // SAFETY: the lab's exec and stream (a destroyed one is the driver's
            // to answer).
            unsafe { sys::cuGraphLaunch(exec(e), stream) }.result()?;
            Ok(())
        })
    }

    fn graph_exec_destroy(&mut self, ops: &[Operand]) -> Result<Outcome, DriverError> {
        let (_, e) = self.raw(ops, 0, ObjKind::GraphExec)?;
        // SAFETY: the lab's exec; the driver waits for none of its launches.
        unsafe { sys::cuGraphExecDestroy(exec(e)) }.result()?;
        Ok(Outcome::default())
    }

    fn graph_destroy(&mut self, ops: &[Operand]) -> Result<Outcome, DriverError> {
        let (gid, g) = self.raw(ops, 0, ObjKind::Graph)?;
        // SAFETY: the lab's graph; its nodes go with it, an exec made from it stays.
        unsafe { sys::cuGraphDestroy(graph(g)) }.result()?;
        self.graph_tail.remove(&gid);
        Ok(Outcome::default())
    }

    /// The device's graph memory: reserved and used bytes
    /// (`CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT` / `USED_MEM_CURRENT`).
    pub(super) fn graph_memory(&self) -> Option<(u64, u64)> {
        let attr = |a: sys::CUgraphMem_attribute| {
            let mut v = 0u64;
            // SAFETY: both attributes are cuuint64_t, written to `v`; this
            // backend's device.
            let r = unsafe { sys::cuDeviceGetGraphMemAttribute(self.dev, a, (&raw mut v).cast()) };
            (r == sys::CUresult::CUDA_SUCCESS).then_some(v)
        };
        use sys::CUgraphMem_attribute as G;
        Some((
            attr(G::CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT)?,
            attr(G::CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT)?,
        ))
    }
}
