"""Kineto `Input type` names and ScalarType codes, with element sizes and canonical names.

This is the one place that knows element sizes and dtype spellings: the ingester uses it to
fill `shapes.dtype` (canonical), `shapes.elem_bytes` and `shapes.bytes`, and the `dtypes`
table is built from it. The canonical spelling of a dtype is torch's name without the
`torch.` prefix (`float16`, `bfloat16`, `float8_e4m3fn`, `int64`): every view and report uses it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    name: str  # as Kineto writes it in `Input type`
    canonical: str | None  # torch name, e.g. "bfloat16"; None for non-tensor entries
    elem_bytes: int | None  # None for non-tensor entries
    is_tensor: bool


_TENSOR_TYPES: list[tuple[str, str, int]] = [
    ("float", "float32", 4),
    ("double", "float64", 8),
    ("c10::Half", "float16", 2),
    ("c10::BFloat16", "bfloat16", 2),
    ("c10::Float8_e4m3fn", "float8_e4m3fn", 1),
    ("c10::Float8_e5m2", "float8_e5m2", 1),
    ("c10::Float8_e4m3fnuz", "float8_e4m3fnuz", 1),
    ("c10::Float8_e5m2fnuz", "float8_e5m2fnuz", 1),
    ("c10::Float8_e8m0fnu", "float8_e8m0fnu", 1),
    ("c10::Float4_e2m1fn_x2", "float4_e2m1fn_x2", 1),
    ("long int", "int64", 8),
    ("long", "int64", 8),
    ("long long", "int64", 8),
    ("__int64", "int64", 8),
    ("int64_t", "int64", 8),
    ("int", "int32", 4),
    ("int32_t", "int32", 4),
    ("short int", "int16", 2),
    ("short", "int16", 2),
    ("int16_t", "int16", 2),
    ("signed char", "int8", 1),
    ("int8_t", "int8", 1),
    ("unsigned char", "uint8", 1),
    ("uint8_t", "uint8", 1),
    ("unsigned short", "uint16", 2),
    ("uint16_t", "uint16", 2),
    ("unsigned int", "uint32", 4),
    ("uint32_t", "uint32", 4),
    ("unsigned long", "uint64", 8),
    ("uint64_t", "uint64", 8),
    ("bool", "bool", 1),
    ("c10::complex<c10::Half>", "complex32", 4),
    ("c10::complex<float>", "complex64", 8),
    ("c10::complex<double>", "complex128", 16),
    ("c10::qint8", "qint8", 1),
    ("c10::quint8", "quint8", 1),
    ("c10::qint32", "qint32", 4),
    ("c10::quint4x2", "quint4x2", 1),
    ("c10::quint2x4", "quint2x4", 1),
    ("c10::Bits8", "bits8", 1),
    ("c10::Bits16", "bits16", 2),
]

_NON_TENSOR_TYPES = ["Scalar", "ScalarList", "TensorList", "GenericList", "Int", "Bool", "Double", "String", "Device", "Layout", "MemoryFormat", "ScalarType", ""]

DTYPES: dict[str, DType] = {n: DType(n, c, b, True) for n, c, b in _TENSOR_TYPES}
DTYPES.update({n: DType(n, None, None, False) for n in _NON_TENSOR_TYPES})

# c10::ScalarType codes as they appear in `Concrete Inputs` (e.g. the dtype argument of aten::to).
SCALAR_TYPE_CODES: dict[int, tuple[str, int]] = {
    0: ("uint8", 1),
    1: ("int8", 1),
    2: ("int16", 2),
    3: ("int32", 4),
    4: ("int64", 8),
    5: ("float16", 2),
    6: ("float32", 4),
    7: ("float64", 8),
    8: ("complex32", 4),
    9: ("complex64", 8),
    10: ("complex128", 16),
    11: ("bool", 1),
    12: ("qint8", 1),
    13: ("quint8", 1),
    14: ("qint32", 4),
    15: ("bfloat16", 2),
    16: ("quint4x2", 1),
    17: ("quint2x4", 1),
    18: ("bits1x8", 1),
    19: ("bits2x4", 1),
    20: ("bits4x2", 1),
    21: ("bits8", 1),
    22: ("bits16", 2),
    23: ("float8_e5m2", 1),
    24: ("float8_e4m3fn", 1),
    25: ("float8_e5m2fnuz", 1),
    26: ("float8_e4m3fnuz", 1),
    27: ("uint16", 2),
    28: ("uint32", 4),
    29: ("uint64", 8),
    44: ("float8_e8m0fnu", 1),
    45: ("float4_e2m1fn_x2", 1),
}


# c10::ScalarType names as printed in args such as the `dtype` of collectives (Float, BFloat16, ...).
SCALAR_TYPE_NAMES: dict[int, str] = {
    0: "Byte", 1: "Char", 2: "Short", 3: "Int", 4: "Long", 5: "Half", 6: "Float", 7: "Double",
    8: "ComplexHalf", 9: "ComplexFloat", 10: "ComplexDouble", 11: "Bool", 12: "QInt8", 13: "QUInt8",
    14: "QInt32", 15: "BFloat16", 16: "QUInt4x2", 17: "QUInt2x4", 21: "Bits8", 22: "Bits16",
    23: "Float8_e5m2", 24: "Float8_e4m3fn", 25: "Float8_e5m2fnuz", 26: "Float8_e4m3fnuz", 27: "UInt16",
    28: "UInt32", 29: "UInt64", 44: "Float8_e8m0fnu", 45: "Float4_e2m1fn_x2",
}
