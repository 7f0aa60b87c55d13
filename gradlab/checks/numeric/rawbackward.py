"""What a custom backward really returns, before autograd's own fix-ups.

Autograd quietly casts a wrong dtype and sums an expandable wrong shape down before anyone sees a
gradient, so the contract check calls backward nodes itself:

- the checked callable is a Function's `apply`: its node is called with the run's grad_outputs
  and the return value is compared with the call's own arguments (non-tensors included);
- anything else (a plain function or module wrapping Functions, a `torch.library` op): every
  custom Function node in the output's graph is called with grad_outputs made from the node's
  own metadata, and each returned gradient is compared with what the node's input edge expects;
- a graph with no custom Function node (plain autograd ops) has no custom backward to call:
  torch's own nodes return unreduced gradients by design (the engine sums them to shape), so
  only the in-place checks apply there, and the row says so.

When the checked callable is a Function's `apply` and every output takes a gradient, the run
being compared calls its node directly (direct_backward): a return value that passes the contract
is exactly what autograd would hand on, so one forward and one backward serve both checks.
Otherwise (raw_backward) each call runs on a forward of its own (copied inputs), so a backward
that writes into its inputs or grad_output cannot disturb the run being compared.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, dtype_name, flat_outputs, relayout, standard_normal
from gradlab.checks.numeric.engine import call_node
from gradlab.results import Finding
from gradlab.torchcompat import has, missing_note
from gradlab.torchstate import replay

#: Graph nodes visited at most when looking for custom Function nodes (a guard, not a limit
#: any real model reaches between one op's inputs and outputs).
MAX_NODES = 10_000


@dataclass
class RawResult:
    """The findings, the nodes whose return value was checked, and why none could be."""

    findings: list[Finding] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    #: why no return value could be checked ("" when one was).
    unavailable: str = ""
    #: the graph holds no custom Function node (nothing of the user's to call).
    no_custom: bool = False
    #: direct_backward: the gradient of each differentiable input when autograd would pass the
    #: returned ones on unchanged (the contract holds, each leads straight to an input).
    grads: list[Any] | None = None
    #: direct_backward: what the direct call raised.
    error: BaseException | None = None


def grad_output_as(g64: Tensor, like: Any, layout: str) -> Tensor:
    """grad_output with the values of `g64`, like's dtype and device, laid out as `layout`."""
    g = g64.to(dtype=like.dtype, device=like.device)
    if layout == "contiguous" and g is not g64 and g.is_contiguous():
        return g  # the cast made it fresh already: no second copy
    out = relayout(g, "broadcast" if layout == "expanded" else layout)
    # a layout that does not apply to this shape (a 0-d noncontiguous) is a plain copy
    return out if out is not None else g.clone()


def custom_nodes(roots: Sequence[Any]) -> list[Any]:
    """The custom Function nodes reachable from `roots`, outputs first."""
    seen: set[int] = set()
    queue, found = list(roots), []
    while queue and len(seen) < MAX_NODES:
        node = queue.pop(0)
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if hasattr(node, "_forward_cls"):
            found.append(node)
        queue.extend(nxt for nxt, _ in getattr(node, "next_functions", ()))
    return found


def direct_args(fn: Callable[..., Any], node: Any, inputs: Inputs) -> list[Any] | None:
    """The forward arguments when `fn` is the `apply` of the Function that made `node`."""
    cls = getattr(fn, "__self__", None)
    if cls is None or getattr(node, "_forward_cls", None) is not cls:
        return None
    if not inputs.kwargs:
        return list(inputs.args)
    forward: Any = getattr(cls, "forward", None)
    try:  # apply binds keyword arguments to forward's parameters, in order
        bound = inspect.signature(forward).bind(None, *inputs.args, **inputs.kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return list(bound.arguments.values())[1:]


def output_metadata(node: Any, returned: Any = None) -> list[Any] | None:
    """Shape, dtype and device of each output of `node` (each grad_output it takes): its
    `_input_metadata`; on a torch without it (before 2.5) the tensors of `returned`, what the
    Function's apply that made `node` returned (its outputs, in order), or None."""
    if has("node_metadata"):
        return list(node._input_metadata)
    if returned is None:
        return None
    return [t for t in (returned if isinstance(returned, tuple) else (returned,))
            if isinstance(t, Tensor)]


def node_grads(meta: Sequence[Any], layout: str, gen: torch.Generator) -> list[Tensor]:
    """Random grad_outputs for every output of a node, from its metadata."""
    return [grad_output_as(standard_normal(tuple(m.shape), gen), m, layout) for m in meta]


def edge_metadata(edge: tuple[Any, int]) -> Any:
    """Shape, dtype and device the gradient sent along `edge` must have."""
    nxt, nr = edge
    var = getattr(nxt, "variable", None)  # AccumulateGrad: the leaf itself
    meta = output_metadata(nxt) if var is None else None  # None: torch < 2.5, not known
    return var if var is not None else meta[nr] if meta is not None else None


def check_graph_node(node: Any, raw: Sequence[Any], name: str) -> list[Finding]:
    """Count and shape/dtype/device of `raw` against the node's own input edges."""
    needs = tuple(node.needs_input_grad)
    edges = node.next_functions
    n = len(needs)
    found = []
    if len(raw) != n and not (len(raw) > n and all(r is None for r in raw[n:])):
        found.append(Finding("gradients", -1, "wrong_count", got=len(raw), want=n, node=name))
    # A Function's edges are its tensor args only; the args that require grad map, in order,
    # to the edges that lead somewhere.
    live = [e for e in edges if e[0] is not None]
    wanted = [p for p, need in enumerate(needs) if need]
    if len(wanted) != len(live):
        return found
    for p, edge in zip(wanted, live, strict=True):
        like = edge_metadata(edge)
        if p < len(raw) and isinstance(raw[p], Tensor) and like is not None:
            found += tensor_findings(p, raw[p], like, name)
    return found


def sums_to(shape: Sequence[int], grad_shape: Sequence[int]) -> bool:
    """Whether autograd's engine sums a gradient of `grad_shape` down to an input of `shape`
    (the input's shape expands to it: torch's validate_outputs accepts it and calls sum_to):
    a backward returning the gradient at the output's broadcast shape is right (gpytorch's
    covariance Functions do it for a [1, 1] lengthscale)."""
    if len(shape) > len(grad_shape):
        return False
    tail = grad_shape[len(grad_shape) - len(shape):]
    return all(s in (1, g) for s, g in zip(shape, tail, strict=True))


def tensor_findings(i: int, grad: Tensor, like: Any, node: str = "") -> list[Finding]:
    """A gradient of the wrong shape, dtype or device for input `i` (first problem only); a
    shape the engine sums down to the input's is `summed_shape` (sums_to: the gradient a user
    sees is right, the contract only leans on the engine)."""
    if tuple(grad.shape) != tuple(like.shape):
        hint = "summed_shape" if sums_to(tuple(like.shape), tuple(grad.shape)) else "wrong_shape"
        return [Finding("input", i, hint, got=list(grad.shape), want=list(like.shape),
                        node=node)]
    if grad.dtype != like.dtype:
        return [Finding("input", i, "wrong_dtype", got=dtype_name(grad.dtype),
                        want=dtype_name(like.dtype), node=node)]
    if grad.device != like.device:
        return [Finding("input", i, "wrong_device", got=str(grad.device),
                        want=str(like.device), node=node)]
    return []


def returned_gradients(args: Sequence[Any], raw: Sequence[Any]) -> list[Finding]:
    """Count, None for non-tensors, and shape/dtype/device of each returned gradient."""
    found: list[Finding] = []
    n = len(args)
    if len(raw) != n and not (len(raw) > n and all(r is None for r in raw[n:])):
        found.append(Finding("gradients", -1, "wrong_count", got=len(raw), want=n))
    for i, (arg, grad) in enumerate(zip(args, raw, strict=False)):
        if not isinstance(arg, Tensor):
            if grad is not None:
                found.append(Finding("input", i, "non_tensor_grad", want=type(arg).__name__))
            continue
        if isinstance(grad, Tensor) and arg.requires_grad:
            # a gradient for an input that does not require grad is dropped by autograd
            # unread (validate_outputs skips its edge): nothing of the call's
            found += tensor_findings(i, grad, arg)
    return found


def _storages(tensors: Sequence[Any]) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in tensors if isinstance(t, Tensor)}


def ctx_aliases(node: Any, args: Sequence[Any], outs: Sequence[Tensor],
                name: str = "") -> list[Finding]:
    """Inputs or outputs kept as ctx attributes instead of save_for_backward.

    An output on ctx is a reference cycle (output -> node -> ctx -> output): every activation
    lives until the cyclic collector runs.  A detached copy of an output's storage on ctx makes
    no cycle (it holds no autograd link to the output) but, as an input on ctx, escapes
    autograd's version check: an in-place update between forward and backward gives a
    silently wrong gradient instead of an error.  Intermediate tensors on ctx are allowed, so
    only storage shared with an input or an output counts.
    """
    ins, outputs = _storages(args), _storages(outs)
    found = []
    for attr, value in vars(node).items():
        values = value if isinstance(value, (list, tuple)) else (value,)
        tensors = [v for v in values if isinstance(v, Tensor)]
        for kind, storages in (("ctx_output", outputs), ("ctx_input", ins)):
            shared = [t for t in tensors if _storages([t]) & storages]
            if shared:
                if kind == "ctx_output" and not any(t.requires_grad for t in shared):
                    kind = "ctx_output_detached"  # the output or a view of it requires grad
                    if _views_only(outs, shared):
                        break  # an in-place update of a Function's view output raises
                found.append(Finding("ctx", -1, kind, got=f"ctx.{attr}", node=name))
                break
    return found


def _views_only(outs: Sequence[Tensor], kept: Sequence[Tensor]) -> bool:
    """Every output sharing storage with the tensors kept on ctx is a view made inside the
    Function (a slice of its buffer): autograd refuses an in-place update of such an output
    ("Output 0 of ... is a view ... modified inplace"), so no update can reach what backward
    reads (difftopk's LogSumExp_F keeps the buffer its output slices)."""
    storages = _storages(kept)
    sharing = [o for o in outs if _storages([o]) & storages]
    return bool(sharing) and all(o._is_view() for o in sharing)


#: The findings on where a Function keeps tensors (memory, a version check escaped), which say
#: nothing of the values it computes: a variant failing beside one is judged as beside a
#: passing base case (mpc's LQR solver keeps its outputs on ctx; its small variant's error is
#: its solver's absolute tolerance, a scale_limited warn).
STORAGE_HINTS = ("ctx_output", "ctx_output_detached", "ctx_input")


def direct_backward(fn: Callable[..., Any], inputs: Inputs, outs: Sequence[Tensor],
                    grad_outputs: Sequence[Tensor]) -> RawResult | None:
    """Call the custom Function node that made every output, with `grad_outputs`, as the engine
    would (engine.call_node), and check its return value; with the gradients when they are what
    autograd would hand on.  None when the outputs do not all come from one custom node (the
    engine would pass zeros to an output without a gradient, or run other nodes too)."""
    node = outs[0].grad_fn if outs else None
    meta = output_metadata(node) if node is not None else None  # None: torch < 2.5
    if (meta is None or not hasattr(node, "_forward_cls") or len(grad_outputs) != len(outs)
            or len(outs) != len(meta) or not all(o.grad_fn is node for o in outs)):
        return None
    args = direct_args(fn, node, inputs)
    name = "" if args is not None else (
        type(node).__name__.removesuffix("Backward") or type(node).__name__)
    aliases = ctx_aliases(node, inputs.args if args is None else args, outs, name)
    try:
        raw = call_node(node, grad_outputs)
    except Exception as exc:
        return RawResult(aliases, unavailable=f"backward raised {type(exc).__name__}", error=exc)
    found = returned_gradients(args, raw) if args is not None else \
        check_graph_node(node, raw, name)
    result = RawResult(found + aliases, [type(node).__name__ if args is not None else name])
    if not found:
        # The engine casts, sums to shape or rejects a return value that breaks the contract:
        # only one that keeps it is what autograd hands on.
        result.grads = leaf_gradients(node, raw, inputs)
    return result


def leaf_gradients(node: Any, raw: Sequence[Any], inputs: Inputs) -> list[Any] | None:
    """The gradient of each differentiable input (None: unused) when every edge of `node`
    leads straight to one of them, each at most once; None otherwise (autograd would sum other
    paths into them: a leaf passed twice, an input also used before the Function)."""
    if not all(r is None or isinstance(r, Tensor) for r in raw):
        return None
    diff = inputs.diff_index
    where = {id(inputs.args[i]): k for k, i in enumerate(diff)}
    if len(where) < len(diff):
        return None
    grads: list[Any] = [None] * len(diff)
    seen: set[int] = set()
    live = [e for e in node.next_functions if e[0] is not None]
    wanted = [p for p, need in enumerate(node.needs_input_grad) if need]
    if len(live) != len(wanted):
        return None
    for p, (nxt, _) in zip(wanted, live, strict=True):
        k = where.get(id(getattr(nxt, "variable", None)), -1)
        if k < 0 or k in seen:
            return None
        seen.add(k)
        grads[k] = raw[p] if p < len(raw) else None
    return grads


def raw_backward(fn: Callable[..., Any], inputs: Inputs, grad_outs64: Sequence[Tensor],
                 go_layout: str) -> RawResult:
    """Call the backward nodes of `fn`'s graph directly (engine.call_node: grad mode off, as the
    engine runs a backward) and check what they return."""
    replay()  # the case's RNG state, as for every forward of the Function
    with torch.enable_grad():
        returned = fn(*inputs.args, **inputs.kwargs)
    outs = flat_outputs(returned)
    roots = [o.grad_fn for o in outs if o.grad_fn is not None]
    if not roots:
        return RawResult(unavailable="no output has a gradient function")
    args = direct_args(fn, roots[0], inputs)
    meta = output_metadata(roots[0], returned if args is not None else None)
    if args is not None and meta is not None and len(grad_outs64) == len(meta):
        grads = [grad_output_as(g, m, go_layout) for g, m in zip(grad_outs64, meta, strict=True)]
        aliases = ctx_aliases(roots[0], args, outs)
        try:
            raw = call_node(roots[0], grads)
        except Exception as exc:  # the real backward reports the crash
            return RawResult(aliases, unavailable=f"backward raised {type(exc).__name__}")
        return RawResult(returned_gradients(args, raw) + aliases, [type(roots[0]).__name__])
    nodes = custom_nodes(roots)
    if not nodes:
        return RawResult(no_custom=True)
    guessed = False
    if not has("node_metadata"):  # grad_outputs for a node inside the graph need its metadata
        if meta is None and nodes[0] is roots[0] and all(o.grad_fn is roots[0] for o in outs):
            # a callable returning a Function's outputs as they are: what it returned are
            # the node's outputs, unless it dropped some (then calling it raises: a skip)
            meta, guessed = output_metadata(roots[0], returned), True
        if meta is None:
            return RawResult(unavailable=missing_note("node_metadata"))
        nodes = [roots[0]]  # the Function's own node: its outputs are what apply returned
    gen = torch.Generator().manual_seed(0)
    result = RawResult()
    for node in nodes:
        name = type(node).__name__.removesuffix("Backward") or type(node).__name__
        result.findings += ctx_aliases(node, inputs.args, outs, name)
        try:
            own = meta if node is roots[0] and meta is not None else output_metadata(node)
            raw = call_node(node, node_grads(own or [], go_layout, gen))
        except Exception as exc:
            result.unavailable = missing_note("node_metadata") if guessed else \
                f"calling {name}'s backward raised {type(exc).__name__}"
            continue
        result.checked.append(name)
        result.findings += check_graph_node(node, raw, name)
    if result.checked:
        result.unavailable = ""
    return result
