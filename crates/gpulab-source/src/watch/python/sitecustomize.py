# gpulab watch's startup hook for Python programs.
#
# `gpulab watch` puts an archive holding this file first on the program's
# PYTHONPATH, so every Python process of the program runs it at startup. It
# reads what PyTorch, CuPy and JAX say of their own device memory and hands
# the figures to gpulab's agent, already loaded into the process by the CUDA
# driver. It keeps to these rules:
#
# - The program sees no difference. It takes itself off sys.path, runs the
#   sitecustomize the program would have run without gpulab, imports no
#   framework, and starts nothing (no thread) until the program imports one.
#   Nothing it does raises into the program.
# - It never starts CUDA. A framework is read only once the program has made
#   it use the GPU: the agent is in the process (the driver loads it at the
#   program's cuInit) and the framework says it is initialised.
# - It writes nowhere. The figures go to the agent, which writes only to
#   gpulab's pipe after checking it is that pipe.
# - Signals stay the program's: its one thread blocks them all.
# - It costs at most 0.5% of a core: it reads less often when reading costs
#   more.
#
# Written to parse on any Python (no f-strings, no keyword-only arguments), so
# an old interpreter the program happens to run sees nothing either.

import sys

_HERE = __file__.rsplit("/", 1)[0]
_FRAMEWORKS = ("torch", "cupy", "jax")
# Seconds between readings at the least, and the most of the hook thread's
# time reading may take.
_PERIOD = 0.1
_BUDGET = 0.005


def _chain():
    """Runs the sitecustomize this one hides, as Python would have."""
    path = [p for p in sys.path if p != _HERE]
    if sys.version_info < (3, 5):
        import imp

        try:
            found = imp.find_module("sitecustomize", path)
        except ImportError:
            return
        try:
            imp.load_module("sitecustomize", *found)
        finally:
            if found[0] is not None:
                found[0].close()
        return
    import importlib.machinery
    import importlib.util

    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


class _Unreadable(Exception):
    """A framework without what the hook reads."""


def _needs(owner, name):
    found = getattr(owner, name, None)
    if found is None:
        raise _Unreadable("it has no " + name)
    return found


def _torch(torch):
    cuda = _needs(torch, "cuda")
    if not _needs(cuda, "is_initialized")():
        return None
    stats = _needs(cuda, "memory_stats")
    out = []
    for device in range(cuda.device_count()):
        s = stats(device)
        if s:
            out.append(
                (
                    device,
                    s["allocated_bytes.all.current"],
                    s["reserved_bytes.all.current"],
                    None,
                )
            )
    return out


def _cupy(cupy):
    pool = _needs(cupy, "get_default_memory_pool")()
    device = cupy.cuda.runtime.getDevice()
    return [(device, pool.used_bytes(), pool.total_bytes(), None)]


def _jax(jax):
    bridge = sys.modules.get("jax._src.xla_bridge")
    if not _needs(bridge, "backends_are_initialized")():
        return None
    out = []
    for device in _needs(jax, "local_devices")():
        if getattr(device, "platform", None) != "gpu":
            continue
        s = device.memory_stats()
        if not s:
            continue
        in_use = s.get("bytes_in_use", 0)
        reserved = s.get("pool_bytes") or s.get("bytes_reserved") or in_use
        index = getattr(device, "local_hardware_id", None)
        out.append((device.id if index is None else index, in_use, reserved, s.get("bytes_limit")))
    return out


def _importing(module):
    """Whether the program is still importing it (its attributes are not all
    there yet)."""
    return getattr(getattr(module, "__spec__", None), "_initializing", False)


_READERS = {"torch": ("pytorch", _torch), "cupy": ("cupy", _cupy), "jax": ("jax", _jax)}

# Under `gpulab watch --torch-history`: PyTorch's memory history on, and its
# live tensors sent by line at the highest readings and at a refusal.
# A look is taken when a device's tensors reach this much more than at the
# last look; the most lines sent (the rest summed).
_LOOK_RISE = 1.05
_LINES_SENT = 200


def _own(filename):
    """Whether a frame is the program's own code, not an installed package's
    or the standard library's (the agent's rule, crates/gpulab-agent/src/
    python.rs `is_users`)."""
    if "/site-packages/" in filename or "/dist-packages/" in filename:
        return False
    # Imported from a descriptor: gpulab's own hook.
    if filename.startswith("/proc/") and "/fd/" in filename:
        return False
    if filename.startswith("<frozen "):
        return False
    parts = filename.split("/")
    for a, b in zip(parts, parts[1:]):
        if a in ("lib", "lib64") and b.startswith("python3.") and b[8:].isdigit():
            return False
    return True


def _imports_nothing():
    """Whether PyTorch's snapshot would import nothing from the hook's thread:
    it reads `torch._inductor` (importing it, and some 880 modules, where the
    program had not), and an import on two threads at once can fail the
    program's own. True once the program has imported it and no module of
    PyTorch is being imported."""
    if "torch._inductor" not in sys.modules:
        return False
    try:
        modules = list(sys.modules.items())
    except RuntimeError:
        return False
    return not any(name.startswith("torch") and _initializing(m) for name, m in modules)


def _initializing(module):
    """`_importing`, read from the module's own dictionary: a lazy module
    loads itself on any attribute read, and that would be an import here."""
    try:
        spec = object.__getattribute__(module, "__dict__").get("__spec__")
        return bool(getattr(spec, "_initializing", False))
    except Exception:
        return True


def _clean(text):
    return text.replace("\n", " ").replace("\t", " ")


def _alive_by_line(snapshot, device):
    """PyTorch's live blocks on `device` in a `_snapshot()`, by the innermost
    frame of the program's own code that allocated each (frames come
    innermost first): the text `gpulab_framework_alive` reads, and the
    tensors and bytes of the lines past the most sent."""
    groups = {}
    for segment in snapshot.get("segments", ()):
        if segment.get("device") != device:
            continue
        for block in segment.get("blocks", ()):
            if block.get("state") != "active_allocated":
                continue
            at = ("", 0, "")
            for frame in block.get("frames") or ():
                name = frame.get("filename", "")
                if _own(name):
                    at = (name, frame.get("line", 0), frame.get("name", ""))
                    break
            n, size = groups.get(at, (0, 0))
            groups[at] = (n + 1, size + block.get("size", 0))
    ordered = sorted(groups.items(), key=lambda g: -g[1][1])
    text = "".join(
        "%d\t%d\t%d\t%s\t%s\n" % (n, size, line, _clean(function), _clean(name))
        for (name, line, function), (n, size) in ordered[:_LINES_SENT]
    )
    rest = ordered[_LINES_SENT:]
    return (
        text.encode("utf-8", "replace"),
        sum(n for _, (n, _) in rest),
        sum(size for _, (_, size) in rest),
    )


class _Agent(object):
    """gpulab's agent in this process, when the driver has loaded it."""

    def __init__(self, ctypes, lib):
        u64, u32, text = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_char_p
        self.memory = lib.gpulab_framework_memory
        self.memory.argtypes = [text, u32, u64, u64, u64]
        self.refused = lib.gpulab_framework_refused
        self.refused.argtypes = [text, u32, u64, u64, u64]
        self.unreadable = lib.gpulab_framework_unreadable
        self.unreadable.argtypes = [text, text]
        self.alive = lib.gpulab_framework_alive
        self.alive.argtypes = [text, u32, u32, text, u64, u64, u64]
        # Marks the calling thread's driver calls as the hook's own.
        self.quiet = lib.gpulab_framework_quiet

    @staticmethod
    def find():
        import ctypes
        import os

        path = os.environ.get("CUDA_INJECTION64_PATH")
        if not path:
            return None
        try:
            # Only a library already loaded: the hook never loads one.
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD)
            return _Agent(ctypes, lib)
        except (OSError, AttributeError):
            return None


class _Watch(object):
    def __init__(self):
        self.stopping = False
        self.agent = None
        self.sent = {}
        self.given_up = set()
        self.read = set()
        self.observing = False
        # Why the observer could not be attached, until the agent can hear it.
        self.pending = None
        # `--torch-history`: asked for, and on once PyTorch said so; the
        # tensors' bytes at the last look, by device.
        import os

        self.history = os.environ.get("GPULAB_TORCH_HISTORY") == "1"
        self.history_on = False
        self.looked = {}
        self.pending_history = None
        self.late = 0
        # A highest reading went unlooked: a look would have imported.
        self.unlooked = False

    def run(self):
        import signal
        import time

        try:
            every = getattr(signal, "valid_signals", lambda: range(1, signal.NSIG))()
            signal.pthread_sigmask(signal.SIG_BLOCK, every)
        except Exception:
            return  # signals could land here: read nothing
        clock = getattr(time, "thread_time", time.time)
        period = _PERIOD
        costs = []
        quiet = False
        while not self.stopping:
            # Until PyTorch is imported, a program asking for its history is
            # looked at often: the history must be on before CUDA starts.
            time.sleep(0.01 if self.history and not self.observing else period)
            self.observe_torch()
            if self.agent is None:
                self.agent = _Agent.find()
                if self.agent is None:
                    continue
            if not quiet:
                self.agent.quiet()
                quiet = True
            if self.pending is not None:
                self.give_up("pytorch", *self.pending)
                self.pending = None
            if self.pending_history is not None:
                self.give_up("pytorch", self.pending_history, "its tensors by line are not seen")
                self.pending_history = None
            if self.late:
                self.give_up(
                    "pytorch",
                    _Unreadable(
                        "%d bytes of tensors were allocated before its memory history came "
                        "on; they are counted as no line's" % self.late
                    ),
                    "some of its tensors carry no line",
                )
                self.late = 0
            began = clock()
            first = self.read_all()
            # The median of the last five readings sets the pace; a
            # framework's first reading (its setup) does not. This thread's
            # own CPU time, not the wall's: waiting for the interpreter while
            # the program computes costs the program nothing.
            if not first:
                costs = (costs + [clock() - began])[-5:]
            period = _PERIOD
            if costs:
                period = max(_PERIOD, sorted(costs)[len(costs) // 2] / _BUDGET)

    def read_all(self):
        """Reads every framework the program imported; true when one was
        read for the first time."""
        first = False
        for module, (name, read) in _READERS.items():
            framework = sys.modules.get(module)
            if framework is None or name in self.given_up or _importing(framework):
                continue
            try:
                figures = read(framework)
            except Exception as e:
                self.give_up(name, e)
                continue
            if figures is not None and name not in self.read:
                self.read.add(name)
                first = True
            for device, allocated, reserved, limit in figures or ():
                if name == "pytorch" and self.history_on:
                    self.look_if_higher(framework, device, allocated)
                now = (allocated, reserved, limit)
                if self.sent.get((name, device)) != now:
                    self.sent[(name, device)] = now
                    self.agent.memory(
                        name.encode(),
                        device,
                        allocated,
                        reserved,
                        2**64 - 1 if limit is None else limit,
                    )
        return first

    def look_if_higher(self, torch, device, allocated):
        """Sends PyTorch's live tensors on `device` by line when they reach
        more than they held at the last look, where a look imports nothing."""
        if allocated <= 0 or allocated < self.looked.get(device, 0) * _LOOK_RISE:
            return
        if not _imports_nothing():
            self.unlooked = True
            return
        self.looked[device] = allocated
        self.send_alive(torch, device, 0)

    def send_alive(self, torch, device, moment):
        import time

        try:
            began = time.monotonic()
            text, tensors, size = _alive_by_line(torch.cuda.memory._snapshot(), device)
            took = int((time.monotonic() - began) * 1e9)
            self.agent.alive(b"pytorch", device, moment, text, tensors, size, took)
        except Exception as e:
            self.history_on = False
            self.give_up("pytorch", e, "its tensors by line are not seen")

    def said_unlooked(self):
        """At exit: the highest readings went unlooked, and why."""
        if self.history_on and self.unlooked and not self.looked and self.agent is not None:
            self.give_up(
                "pytorch",
                _Unreadable(
                    "PyTorch's snapshot imports torch._inductor, which the program never "
                    "imported: gpulab's hook imports nothing beside the program"
                ),
                "its tensors at its highest readings were not looked at",
            )

    def observe_torch(self):
        """PyTorch's out-of-memory observer: the refusal, as it happens. It is
        attached as PyTorch initialises CUDA (its own queue of calls for that
        moment), so a program that runs out at once is seen too."""
        torch = sys.modules.get("torch")
        if self.observing or torch is None or _importing(torch):
            return
        self.observing = True
        try:
            self.attach_observer(torch)
        except Exception as e:
            self.pending = (e, True)

    def attach_observer(self, torch):
        attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
        at_init = getattr(torch.cuda, "_lazy_call", None)
        if attach is None or at_init is None:
            raise _Unreadable("it has no _cuda_attach_out_of_memory_observer")
        watch = self

        def refused(device, asked, limit, free):
            try:
                # CUDA runs by now: the driver has loaded the agent.
                if watch.agent is None:
                    watch.agent = _Agent.find()
                # The allocator's figures at this very moment, ahead of the
                # refusal (its lock is recursive, and newer versions call
                # observers after letting it go).
                s = torch.cuda.memory_stats(device)
                if s:
                    watch.agent.memory(
                        b"pytorch",
                        device,
                        s["allocated_bytes.all.current"],
                        s["reserved_bytes.all.current"],
                        2**64 - 1,
                    )
            except Exception:
                pass
            try:
                watch.agent.refused(b"pytorch", device, asked, free, limit)
            except Exception:
                pass
            if watch.history_on:
                # PyTorch's own pattern: a snapshot inside the observer.
                watch.send_alive(torch, device, 1)

        def attach_now():
            # Runs inside the program's CUDA initialisation: never raises
            # into it.
            try:
                attach(refused)
            except Exception:
                pass
            if watch.history:
                watch.start_history(torch)

        at_init(attach_now)

    def start_history(self, torch):
        """PyTorch's memory history on: the Python stack of every allocation
        from here on, kept for live blocks only. Tensors it already holds have
        none, and that is said."""
        try:
            before = torch.cuda.memory_allocated()
            torch.cuda.memory._record_memory_history(
                enabled="state", context="alloc", stacks="python"
            )
            self.history_on = True
            if before:
                self.late = before
        except Exception as e:
            self.pending_history = e

    def give_up(self, name, e, only_refusals=False):
        # `only_refusals`: True, or what alone is not seen.
        if not only_refusals:
            self.given_up.add(name)
        why = str(e) if isinstance(e, _Unreadable) else "%s: %s" % (type(e).__name__, e)
        if only_refusals is True:
            why = "its refusals are not seen (" + why + ")"
        elif only_refusals:
            why = "%s (%s)" % (only_refusals, why)
        try:
            self.agent.unreadable(name.encode(), why[:300].encode("utf-8", "replace"))
        except Exception:
            pass


class _Imports(object):
    """Finds nothing; notes the program importing a framework, then starts
    the hook's thread, once."""

    def __init__(self):
        self.started = False

    def find_spec(self, name, path=None, target=None):
        if not self.started and name in _FRAMEWORKS:
            self.started = True
            try:
                _start()
            except Exception:
                pass
        return None


def _start():
    import atexit
    import threading

    watch = _Watch()

    def stop():
        watch.stopping = True
        try:
            watch.said_unlooked()
        except Exception:
            pass

    atexit.register(stop)
    thread = threading.Thread(target=watch.run, name="gpulab-frameworks")
    thread.daemon = True
    thread.start()


def _install():
    while _HERE in sys.path:
        sys.path.remove(_HERE)
    if sys.version_info >= (3, 6):
        sys.meta_path.insert(0, _Imports())


try:
    _install()
except Exception:
    pass
_chain()
