"""help()/pydoc show the native API's documentation: every class, method, property and
function that the stub ``rpjrt/_rpjrt.pyi`` documents has a real ``__doc__`` at run time.

PyO3 turns a Rust doc comment (``///``) into the runtime ``__doc__``; an item without one
has ``__doc__ = None`` (or, for a slot such as ``__call__``, CPython's generic text), and
``help(rpjrt.Client.compile)`` then shows nothing. The stub is parsed with ``ast``, so an
item documented there later is checked here without editing this file.
"""

from __future__ import annotations

import ast
import inspect
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

import rpjrt._rpjrt as native

from .conftest import PYTHON_DIR

STUB = PYTHON_DIR / "rpjrt" / "_rpjrt.pyi"

# Items whose runtime __doc__ PyO3 cannot set: PyO3 implements these as type slots
# (tp_new, tp_call, am_await), and CPython gives the slot's wrapper its own generic
# docstring whatever the Rust doc comment says. Their documentation is in the class
# docstring instead; ``test_slot_docs_are_in_the_class_doc`` checks it is there.
SLOT_ITEMS: dict[str, str] = {
    "Plugin.__new__": "tp_new slot: the constructor's doc is CPython's generic text",
    "Client.__new__": "tp_new slot: the constructor's doc is CPython's generic text",
    "Executable.__call__": "tp_call slot: CPython's 'Call self as a function.'",
    "PreparedCall.__call__": "tp_call slot: CPython's 'Call self as a function.'",
    "SessionProgram.__call__": "tp_call slot: CPython's 'Call self as a function.'",
    "Buffer.__await__": "am_await slot: CPython's generic await text",
}


def _generic_docs() -> set[str]:
    """The docstrings CPython gives slot wrappers and inherited methods: not ours."""
    docs = {
        "Call self as a function.",
        "Return repr(self).",
        "Return str(self).",
        "Return hash(self).",
        "Return len(self).",
        "Return self[key].",
        "Return an iterator to be used in await expression.",
        "Create and return a new object.  See help(type) for accurate signature.",
        "Initialize self.  See help(type(self)) for accurate signature.",
    }
    owners: list[type] = [object, type, int, list, dict, tuple, str, bytes, types.CoroutineType]
    for owner in owners:
        for value in vars(owner).values():
            if isinstance(value, (types.WrapperDescriptorType, types.BuiltinMethodType)):
                if value.__doc__:
                    docs.add(value.__doc__.strip())
    return docs


GENERIC_DOCS = _generic_docs()


@dataclass(frozen=True)
class StubItem:
    qualname: str  # "Client", "Client.compile", "wait_spin"
    stub_doc: str
    node: ast.AST


def _is_setter(fn: ast.FunctionDef) -> bool:
    return any(
        isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter") for d in fn.decorator_list
    )


def _is_protocol(cls: ast.ClassDef) -> bool:
    return any(isinstance(b, ast.Name) and b.id == "Protocol" for b in cls.bases)


def _documented_items() -> list[StubItem]:
    tree = ast.parse(STUB.read_text(), filename=str(STUB))
    items: list[StubItem] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            doc = ast.get_docstring(node)
            if doc:
                items.append(StubItem(node.name, doc, node))
        elif isinstance(node, ast.ClassDef) and not _is_protocol(node):
            doc = ast.get_docstring(node)
            if doc:
                items.append(StubItem(node.name, doc, node))
            seen: set[str] = set()
            for fn in node.body:
                if not isinstance(fn, ast.FunctionDef) or _is_setter(fn):
                    continue
                fdoc = ast.get_docstring(fn)
                # Overloads: the first one with a docstring documents the method.
                if fdoc and fn.name not in seen:
                    seen.add(fn.name)
                    items.append(StubItem(f"{node.name}.{fn.name}", fdoc, fn))
    return items


ITEMS = _documented_items()
CHECKED = [i for i in ITEMS if i.qualname not in SLOT_ITEMS]


def _runtime(qualname: str) -> object:
    obj: object = native
    for part in qualname.split("."):
        assert hasattr(obj, part), f"the stub declares {qualname}; rpjrt._rpjrt has no {part}"
        obj = getattr(obj, part)
    return obj


def _doc_problem(obj: object) -> str | None:
    """Why ``obj``'s runtime docstring is not ours, or None when it is."""
    doc = obj.__doc__
    if doc is None or not doc.strip():
        return "has no __doc__"
    if isinstance(obj, types.WrapperDescriptorType):
        return f"is a slot wrapper with CPython's docstring {doc!r}"
    if doc.strip() in GENERIC_DOCS:
        return f"has the generic docstring {doc!r}"
    return None


def test_stub_documents_the_native_api() -> None:
    # The checks below are only as good as the stub: it documents the main classes.
    names = {i.qualname for i in ITEMS}
    expected = {"Client", "Client.compile", "Client.put", "Buffer.block_until_ready",
                "Executable.execute_sharded", "Executable.__call__", "Event.wait"}
    assert expected <= names, expected - names
    assert len(CHECKED) > 60


@pytest.mark.parametrize("item", CHECKED, ids=lambda i: i.qualname)
def test_runtime_doc(item: StubItem) -> None:
    problem = _doc_problem(_runtime(item.qualname))
    assert problem is None, (
        f"rpjrt._rpjrt.{item.qualname} {problem}; the stub says:\n{item.stub_doc}\n"
        "Give the Rust item a /// doc comment (PyO3 makes it the runtime __doc__)."
    )


def test_slot_items_are_exactly_the_undocumentable_ones() -> None:
    """SLOT_ITEMS names stub-documented items only, and only ones PyO3 cannot document."""
    by_name = {i.qualname: i for i in ITEMS}
    for qualname, reason in SLOT_ITEMS.items():
        assert qualname in by_name, f"{qualname} is not documented in the stub: drop it"
        obj = _runtime(qualname)
        method = qualname.rsplit(".", 1)[1]
        if method == "__new__":
            assert obj is object.__new__ or isinstance(obj, types.BuiltinMethodType), reason
        else:
            assert isinstance(obj, types.WrapperDescriptorType), (
                f"{qualname} is no longer a slot wrapper ({type(obj).__name__}): check it "
                "like the others and drop it from SLOT_ITEMS"
            )


def _parameter_names(fn: ast.FunctionDef) -> list[str]:
    a = fn.args
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    names = [p.arg for p in params if p.arg not in ("self", "cls")]
    names += [p.arg for p in (a.vararg, a.kwarg) if p is not None and p.arg != "args"]
    return names


@pytest.mark.parametrize("qualname", sorted(SLOT_ITEMS))
def test_slot_docs_are_in_the_class_doc(qualname: str) -> None:
    """The class docstring explains what the slot's own docstring cannot."""
    item = next(i for i in ITEMS if i.qualname == qualname)
    assert isinstance(item.node, ast.FunctionDef)
    cls_name, method = qualname.split(".")
    cls_doc = inspect.cleandoc(getattr(native, cls_name).__doc__ or "")
    assert len(cls_doc) > 60, f"{cls_name}.__doc__ is too thin to document {method}: {cls_doc!r}"
    if method == "__await__":
        assert "await" in cls_doc, cls_doc
        return
    missing = [p for p in _parameter_names(item.node) if p not in cls_doc]
    assert not missing, (
        f"{cls_name}.__doc__ does not explain {method}'s parameters {missing}:\n{cls_doc}"
    )
