"""The part of W&B's record format (wandb_internal.proto) that the importer reads, built as a
protobuf descriptor at run time: no wandb package, no generated code. Field numbers as in
wandb_internal.proto:

    Record   num (1), history (2), summary (3), config (5), run (17), exit (18)
    History  item (1, repeated Item), step (2: Step, its num)
    Item     key (1), nested_key (2, repeated), value_json (16); boolean, integer, number
    Update   update (1, repeated Item), remove (2, repeated Item): summary and config updates
"""
from __future__ import annotations

from functools import lru_cache
from typing import Optional

from tracelab.core.errors import TracelabError

# History keys W&B adds to every row itself: read as the row's step and times, not as metrics.
BOOKKEEPING = ("_step", "_timestamp", "_runtime")


@lru_cache(maxsize=1)
def record_class():
    """`Record`, with only the fields read here (field numbers as in wandb_internal.proto)."""
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError:
        raise TracelabError("reading W&B runs needs the protobuf package: pip install "
                            "'tracelab[wandb]'") from None
    F = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="tracelab_wandb_subset.proto",
                                              package="tracelab_wandb", syntax="proto3")

    def message(name: str, *fields: tuple, oneof: Optional[str] = None) -> None:
        m = file.message_type.add(name=name)
        if oneof:
            m.oneof_decl.add(name=oneof)
        for fname, number, kind, *rest in fields:
            repeated = "repeated" in rest
            f = m.field.add(name=fname, number=number, type=kind,
                            label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
            if kind == F.TYPE_MESSAGE:
                f.type_name = f".tracelab_wandb.{rest[0]}"
            if "oneof" in rest:
                f.oneof_index = 0

    S, I64, I32, D, B, M = (F.TYPE_STRING, F.TYPE_INT64, F.TYPE_INT32, F.TYPE_DOUBLE,
                            F.TYPE_BOOL, F.TYPE_MESSAGE)
    message("Item", ("key", 1, S), ("nested_key", 2, S, "repeated"),
            ("boolean", 4, B, "oneof"), ("integer", 5, F.TYPE_SINT64, "oneof"),
            ("number", 6, D, "oneof"), ("value_json", 16, S), oneof="value")
    message("Step", ("num", 1, I64))
    message("History", ("item", 1, M, "Item", "repeated"), ("step", 2, M, "Step"))
    message("Update", ("update", 1, M, "Item", "repeated"), ("remove", 2, M, "Item", "repeated"))
    message("Timestamp", ("seconds", 1, I64), ("nanos", 2, I32))
    message("Run", ("run_id", 1, S), ("entity", 2, S), ("project", 3, S),
            ("config", 4, M, "Update"), ("display_name", 8, S),
            ("tags", 10, S, "repeated"), ("start_time", 17, M, "Timestamp"))
    message("Exit", ("exit_code", 1, I32), ("runtime", 2, I32))
    message("Record", ("num", 1, I64), ("history", 2, M, "History"),
            ("summary", 3, M, "Update"), ("config", 5, M, "Update"), ("run", 17, M, "Run"),
            ("exit", 18, M, "Exit"))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tracelab_wandb.Record"))


@lru_cache(maxsize=1)
def item_class():
    from google.protobuf import message_factory
    update = record_class().DESCRIPTOR.fields_by_name["summary"].message_type
    return message_factory.GetMessageClass(update.fields_by_name["update"].message_type)
