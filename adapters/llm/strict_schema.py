"""Pydantic JSON schema → the subset OpenAI accepts with `"strict": true`.

Strict structured outputs require every object to be closed
(`additionalProperties: false`) and every property to be listed in `required`;
optional fields stay optional in meaning because pydantic already expresses
them as `anyOf [..., {"type": "null"}]`. The answer is validated by pydantic
afterwards anyway, so loosening a construct here never admits a bad answer.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def to_strict_json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A strict-compatible copy of `schema`; the input is left untouched.

    Objects whose `additionalProperties` is itself a schema (pydantic's
    `dict[str, X]`) cannot be expressed in strict mode and are left as they
    are: the API then refuses the request with a 400 that names the field.
    """
    root = copy.deepcopy(dict(schema))
    return _strict(root, root)


def _strict(
    node: dict[str, Any], root: dict[str, Any], inlining: frozenset[str] = frozenset()
) -> dict[str, Any]:
    def sub(value: Any) -> Any:
        return _strict(value, root, inlining) if isinstance(value, dict) else value

    for defs_key in ("$defs", "definitions"):
        defs = node.get(defs_key)
        if isinstance(defs, dict):
            for name, sub_schema in defs.items():
                defs[name] = sub(sub_schema)

    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1:
        if ref in inlining:
            # A recursive model cannot be inlined into itself; the bare `$ref` is valid.
            return {"$ref": ref}
        # Strict mode rejects `$ref` with siblings (pydantic adds `description`
        # next to it), so the target is inlined; the node's own keys win.
        merged = {**_resolve(root, ref), **node}
        merged.pop("$ref")
        return _strict(merged, root, inlining | {ref})

    if node.get("type") == "object" or "properties" in node:
        properties = node.get("properties")
        if isinstance(properties, dict):
            node["properties"] = {key: sub(value) for key, value in properties.items()}
            node["required"] = list(properties)
        additional = node.get("additionalProperties")
        if not isinstance(additional, dict):
            node["additionalProperties"] = False

    items = node.get("items")
    if isinstance(items, dict):
        node["items"] = sub(items)
    prefix_items = node.get("prefixItems")
    if isinstance(prefix_items, list):
        node["prefixItems"] = [sub(value) for value in prefix_items]

    # Strict mode knows `anyOf` only; pydantic's discriminated unions emit `oneOf`.
    one_of = node.pop("oneOf", None)
    if isinstance(one_of, list):
        node["anyOf"] = [*node.get("anyOf", []), *one_of]
        node.pop("discriminator", None)
    any_of = node.get("anyOf")
    if isinstance(any_of, list):
        node["anyOf"] = [sub(value) for value in any_of]

    all_of = node.get("allOf")
    if isinstance(all_of, list):
        if len(all_of) == 1 and isinstance(all_of[0], dict):
            node.pop("allOf")
            return _strict({**all_of[0], **node}, root, inlining)
        node["allOf"] = [sub(value) for value in all_of]

    # Every property is required in strict mode, so a default can never apply.
    node.pop("default", None)
    return node


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise ValueError(f"cannot resolve non-local $ref {ref!r}")
    target: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(target, dict) or part not in target:
            raise ValueError(f"dangling $ref {ref!r}")
        target = target[part]
    if not isinstance(target, dict):
        raise ValueError(f"$ref {ref!r} does not point to a schema")
    return copy.deepcopy(target)
