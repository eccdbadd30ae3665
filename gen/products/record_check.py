"""Does a record fit its config's declared features? One check, used by `gen run`'s validation (every record of
every written config, gen/pipeline/shards.py) and by the Hub export (gen/export/typed_records.py).

Why one place: a run whose validation passed is published, loaded with `datasets.load_dataset` and exported to
parquet, and each of those reads the records as the declared features say. If the run checked less than the
export, a record that does not fit would pass validation and fail hours later, in a user's `load_dataset`; if
it checked something else, the two would disagree about the same record. So both call :class:`RecordCheck`.

The rules, for a schema as gen/products/schema.py writes it:

* a record is an object whose fields are exactly the schema's, none missing and none extra;
* an object nested in it (a struct) may leave out a declared key (it loads as null) but never carries one the
  schema lacks (pyarrow would drop it without a word);
* null fits every type;
* an integer type (int64, int32, uint8...) takes a whole number within its range, never a boolean or a float
  (1.5, or even 1.0, in an int64 field is a product bug); a float type takes any number (JSON has one number
  type: 3 is a fine float64);
* a string type takes text only (not a number); bool takes true or false only;
* timestamp[s] takes an ISO date-time to the second without a zone, date32 an ISO date, exactly as gen writes
  them (the export parses them, and `load_dataset` casts them);
* a list takes a JSON array (a Python list or tuple) whose items fit the item type.

Other dtypes a plugin may declare (binary, decimal...) are not checked here; the export's conversion still
types them.

Cheap enough for every record of a run: the check is compiled once per schema, twice. A quick test
(:meth:`RecordCheck.all_fit`) takes many records at once and each field as a column: the set of the column's
Python types, the largest bit length against an integer type's range, list items chained into one column,
struct keys into another, each distinct date or time text parsed once; all of it in C loops. Only records that
do not pass it go through the exact check (:meth:`RecordCheck.mismatch`), which finds and names the first
mismatch of each and has the last word.
"""

from __future__ import annotations

import array
import functools
import itertools
import json
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from gen.products.checks import Checks
from gen.products.schema import Schema, Type, feature_type, list_item

__all__ = ["FITS", "Mismatch", "RecordCheck", "check_conversation"]

FITS = "records fit their config's declared features"  # the check's name in run.json's validation


@dataclass(frozen=True)
class Mismatch:
    """What is wrong with a record: the field (a dotted path, `turns[2].speaker`), what was found, and the type
    the features declare there."""

    field: str
    problem: str
    expected: str

    def describe(self) -> str:
        return f"field {self.field}: {self.problem} (declared {self.expected})"


Checker = Callable[[Any, str], Mismatch | None]  # (value, its path) -> None when it fits

INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
UINT_BITS = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}
FLOATS = {"float16", "halffloat", "float32", "float", "float64", "double"}
STRINGS = {"string", "large_string", "utf8", "large_utf8"}
TEMPORAL = {  # what a JSONL record holds for a date or time, as the message says it
    "timestamp[s]": "an ISO date-time to the second without a zone, e.g. 2023-05-08T13:56:04",
    "date32": "an ISO date, e.g. 2023-05-08",
}


def shown(value: Any) -> str:
    """A value as JSON, cut to 60 characters."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=lambda v: f"<{type(v).__name__}>")
    except ValueError:  # a whole number too long to write out
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def wrong(value: Any, where: str, declared: Type) -> Mismatch:
    return Mismatch(where, f"value {shown(value)} is not {feature_type(declared)}", feature_type(declared))


class RecordCheck:
    """The check of one config's records against its declared features (see the module docstring)."""

    def __init__(self, declared: Schema) -> None:
        self.names = [entry["name"] for entry in declared]
        self._names = set(self.names)
        self._fields = [(entry["name"], compiled(entry)) for entry in declared]
        self._columns = [(operator.itemgetter(entry["name"]), column(entry)) for entry in declared]

    def all_fit(self, records: Sequence[Any]) -> bool:
        """The quick test of many records: True when every one surely fits. Each field is tested over all the
        records at once; False says only that :meth:`mismatch` must look at each record."""
        if not set(map(type, records)) <= {dict} or not set(map(len, records)) <= {len(self.names)}:
            return False
        try:  # each record has len(names) keys, and every name among them: exactly the declared fields
            return all(fits(list(map(value_of, records))) for value_of, fits in self._columns)
        except KeyError:
            return False

    def mismatch(self, record: Any) -> Mismatch | None:
        """None when the record fits; else the first thing that does not."""
        if not isinstance(record, dict):
            return Mismatch("(record)", f"a record is {shown(record)}, not an object", "an object")
        if record.keys() != self._names:
            return self._fields_differ(record)
        for name, check in self._fields:
            found = check(record[name], name)
            if found is not None:
                return found
        return None

    def _fields_differ(self, record: dict) -> Mismatch:
        extra = [str(key) for key in record if key not in self._names]
        missing = [name for name in self.names if name not in record]
        parts = ([f"not in the schema: {', '.join(extra)}"] if extra else []) + (
            [f"missing: {', '.join(missing)}"] if missing else []
        )
        listed = "the fields " + ", ".join(self.names)
        return Mismatch(
            (extra or missing)[0], f"the record's fields differ from the declared features ({'; '.join(parts)})", listed
        )


def compiled(declared: Type) -> Checker:
    """The checker of one declared type."""
    if "struct" in declared:
        return struct_checker(declared)
    if "list" in declared:
        return list_checker(declared)
    return value_checker(declared)


def value_checker(declared: Type) -> Checker:
    dtype = str(declared.get("dtype"))
    if dtype in INT_BITS or dtype in UINT_BITS:
        bits = INT_BITS.get(dtype) or UINT_BITS[dtype]
        low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if dtype in INT_BITS else (0, 2**bits - 1)

        def whole(value: Any) -> bool:
            return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high

        return kind_checker(declared, whole)
    if dtype in FLOATS:
        return kind_checker(declared, lambda value: isinstance(value, int | float) and not isinstance(value, bool))
    if dtype in STRINGS:
        return kind_checker(declared, lambda value: isinstance(value, str))
    if dtype == "bool":
        return kind_checker(declared, lambda value: value is True or value is False)
    if dtype in TEMPORAL:
        return temporal_checker(declared, dtype)
    return lambda value, where: None  # not checked here (see the module docstring)


def kind_checker(declared: Type, fits: Callable[[Any], bool]) -> Checker:
    def check(value: Any, where: str) -> Mismatch | None:
        return None if value is None or fits(value) else wrong(value, where, declared)

    return check


def temporal_checker(declared: Type, dtype: str) -> Checker:
    def check(value: Any, where: str) -> Mismatch | None:
        if value is None or (isinstance(value, str) and iso_text(value, dtype)):
            return None
        return Mismatch(where, f"value {shown(value)} is not {dtype}", TEMPORAL[dtype])

    return check


def iso_text(text: str, dtype: str) -> bool:
    """Is `text` the exact ISO text gen writes for a value of `dtype` (so it reads back as the same value)?"""
    try:
        if dtype == "date32":
            return date.fromisoformat(text).isoformat() == text
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return False
    return parsed.tzinfo is None and parsed.isoformat(timespec="seconds") == text


def list_checker(declared: Type) -> Checker:
    item = list_item(declared)
    check_item = compiled(item)
    scalar = {"string": str}.get(str(item.get("dtype")))  # the commonest list, checked in one pass

    def check(value: Any, where: str) -> Mismatch | None:
        if value is None:
            return None
        if not isinstance(value, list | tuple):
            return wrong(value, where, declared)
        if scalar is not None and all(type(each) is scalar for each in value):
            return None
        for position, each in enumerate(value):
            found = check_item(each, f"{where}[{position}]")
            if found is not None:
                return found
        return None

    return check


def struct_checker(declared: Type) -> Checker:
    fields = [(entry["name"], compiled(entry)) for entry in declared["struct"]]
    names = {name for name, _ in fields}

    def check(value: Any, where: str) -> Mismatch | None:
        if value is None:
            return None
        if not isinstance(value, dict):
            return wrong(value, where, declared)
        extra = [str(key) for key in value if key not in names]
        if extra:
            problem = f"not in the schema (keys not in it: {', '.join(extra)})"
            return Mismatch(f"{where}.{extra[0]}", problem, feature_type(declared))
        for name, check_field in fields:
            if name in value:
                found = check_field(value[name], f"{where}.{name}")
                if found is not None:
                    return found
        return None

    return check


def check_conversation(
    check: RecordCheck, config: str, conversation_id: str, rows: Sequence[Any], checks: Checks
) -> None:
    """Count one conversation's records of `config` into the run's validation tally under :data:`FITS`; each
    record that does not fit is named by config, conversation, position (and id field, if it has one) and field."""
    if check.all_fit(rows):
        checks.add(FITS, len(rows), [])
        return
    fitting = 0
    for position, row in enumerate(rows):
        found = check.mismatch(row)
        if found is None:
            fitting += 1
        else:
            place = record_name(row, conversation_id, position)
            checks.check(FITS, False, f"config {config}, {place}: {found.describe()}")
    checks.add(FITS, fitting, [])


def record_name(row: Any, conversation_id: str, position: int) -> str:
    """ "record 3 of conversation conv-26 (question_id conv-26/q/3)": its place, and its own id when it has one
    (the first text field named `..._id` other than the conversation's)."""
    name = f"record {position} of conversation {conversation_id}"
    if isinstance(row, dict):
        for key, value in row.items():
            if str(key).endswith("_id") and key != "conversation_id" and isinstance(value, str):
                return f"{name} ({key} {shown(value)})"
    return name


# --- the quick test, a column at a time -----------------------------------------------------------------

NONE = type(None)
Column = Callable[[list], bool]  # True: every value of the column surely fits (False: ask the exact check)
# the Python types a scalar may be, and for an integer type its bits and whether it is signed
Kind = tuple[frozenset[type], int | None, bool]
not_none = functools.partial(operator.is_not, None)


def scalar_kind(declared: Type) -> Kind | None:
    """What a value of a plain scalar type may be; None for temporal, unchecked and compound types."""
    dtype = str(declared.get("dtype"))
    if "dtype" not in declared:
        return None
    if dtype in INT_BITS:
        return frozenset({int, NONE}), INT_BITS[dtype], True
    if dtype in UINT_BITS:
        return frozenset({int, NONE}), UINT_BITS[dtype], False
    if dtype in FLOATS:
        return frozenset({int, float, NONE}), None, False
    if dtype in STRINGS:
        return frozenset({str, NONE}), None, False
    if dtype == "bool":
        return frozenset({bool, NONE}), None, False
    return None


def all_of(values: list, kind: Kind) -> bool:
    """Are all `values` of the kind (null allowed), within its range? The range in one C pass: int64 by packing
    into an array of C int64 (the array module's "q" is 8 bytes everywhere), the others by bit length (the one
    value that refuses wrongly, a signed type's lowest, the exact check accepts)."""
    types, bits, signed = kind
    found = set(map(type, values))
    if not found <= types:
        return False
    if bits is None:
        return True
    numbers = list(filter(not_none, values)) if NONE in found else values
    if not numbers:
        return True
    if signed and bits == 64:  # the commonest: C's own conversion says whether each number fits
        try:
            array.array("q", numbers)
        except OverflowError:
            return False
        return True
    if signed:
        return max(map(int.bit_length, numbers)) < bits
    return min(numbers) >= 0 and max(numbers).bit_length() <= bits


def column(declared: Type) -> Column:
    """The quick test of one declared type over a column of values (one field of many records)."""
    if "struct" in declared:
        return struct_column(declared["struct"])
    if "list" in declared:
        items = column(list_item(declared))

        def lists(values: list) -> bool:
            present = list(filter(not_none, values))
            return set(map(type, present)) <= {list, tuple} and items(list(itertools.chain.from_iterable(present)))

        return lists
    dtype = str(declared.get("dtype"))
    if dtype in TEMPORAL:
        return temporal_column(dtype)
    kind = scalar_kind(declared)
    if kind is None:
        return lambda values: True  # not checked (see the module docstring)
    return lambda values: all_of(values, kind)


def struct_column(entries: Schema) -> Column:
    """Objects that may leave a key out (it reads as null) but hold no other: the values each key holds, over
    every object, make that key's column (gathered from the keys present, which nested objects keep few)."""
    fields = {entry["name"]: column(entry) for entry in entries}

    def structs(values: list) -> bool:
        present = list(filter(not_none, values))
        if not set(map(type, present)) <= {dict}:
            return False
        columns: dict[str, list] = {}
        for key, value in itertools.chain.from_iterable(map(dict.items, present)):
            columns.setdefault(key, []).append(value)
        if not columns.keys() <= fields.keys():
            return False
        return all(fields[key](found) for key, found in columns.items())

    return structs


def temporal_column(dtype: str) -> Column:
    """Each distinct text parsed once; texts found good are remembered (a run repeats its `now` and dates)."""
    good: set[str] = set()

    def texts(values: list) -> bool:
        if not set(map(type, values)) <= {str, NONE}:
            return False
        for text in set(filter(not_none, values)) - good:
            if not iso_text(text, dtype):
                return False
            if len(good) < 100_000:
                good.add(text)
        return True

    return texts
