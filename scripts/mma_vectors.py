#!/usr/bin/env python3
"""Convert the H200 tensor-core validation vectors (../shared/data/tensor-core-h200, from Khattak
and Mikaitis, "Accurate Models of NVIDIA Tensor Cores", github.com/north-numerical-computing/
MATLAB-tensor-core, model_validation/H200, commit b12b5a7, BSD 2-Clause, Copyright (c) 2025 Faizan
A. Khattak and Mantas Mikaitis) into tests/data/mma/h200_<fmt>.txt, the project's format:
one inner product per line, `C D a_0 .. a_(k-1) b_0 .. b_(k-1)`, C and D binary32 bit patterns in
hex, the operands as codes of their own format in hex (e4m3: 2 digits, bf16 and fp16: 4). Every
operand is checked to be exactly a value of its format. Usage: scripts/mma_vectors.py SRC DST."""
import struct, sys

def f32(h):
    return struct.unpack('>f', bytes.fromhex(h))[0]

def e4m3_code(x):
    """the OCP e4m3 code of x, which must be exactly representable"""
    s = 0x80 if (x < 0 or (x == 0 and struct.pack('>f', x)[0] & 0x80)) else 0
    a = abs(x)
    for code in range(0x7F):  # 0x7F is NaN
        e, m = code >> 3, code & 7
        v = (m / 8.0) * 2.0 ** -6 if e == 0 else (1 + m / 8.0) * 2.0 ** (e - 7)
        if v == a:
            return s | code
    raise ValueError(f'{x!r} is not an e4m3 value')

def fp16_code(x):
    c = struct.unpack('>H', struct.pack('>e', x))[0]
    assert struct.unpack('>e', struct.pack('>H', c))[0] == x, f'{x!r} is not an fp16 value'
    return c

def bf16_code(h):
    b = int(h, 16)
    assert b & 0xFFFF == 0, f'{h} is not a bf16 value'
    return b >> 16

def convert(src, dst):
    for fmt, out, k in (('E4M3', 'e4m3', 32), ('bf16', 'bf16', 16), ('fp16', 'fp16', 16)):
        d = f'{src}/{fmt}'
        A = [l.split() for l in open(f'{d}/a_H200_{fmt}.txt')]
        B = [l.split() for l in open(f'{d}/b_H200_{fmt}.txt')]
        C = [l.strip() for l in open(f'{d}/c_H200_fp32.txt')]
        D = [l.strip() for l in open(f'{d}/d_H200_fp32.txt')]
        assert len(A) == len(B) == len(C) == len(D) == 5000
        with open(f'{dst}/h200_{out}.txt', 'w') as f:
            f.write(f'# H200 tensor-core vectors, {out} operands, {k} products an inner product, '
                    'fp32 C and D (D = the\n'
                    '# hardware result). Measured by F. A. Khattak and M. Mikaitis, '
                    '"Accurate Models of NVIDIA Tensor\n'
                    '# Cores"; github.com/north-numerical-computing/MATLAB-tensor-core, '
                    'model_validation/H200, commit\n'
                    '# b12b5a7, BSD 2-Clause licence, '
                    'Copyright (c) 2025 Faizan A. Khattak and Mantas Mikaitis.\n'
                    '# Converted by scripts/mma_vectors.py. '
                    'Line: C D a_0..a_(k-1) b_0..b_(k-1) (hex).\n')
            for a, b, c, dd in zip(A, B, C, D):
                assert len(a) == len(b) == k and len(c) == len(dd) == 32
                if out == 'e4m3':
                    codes = [f'{e4m3_code(f32(h)):02x}' for h in a + b]
                elif out == 'bf16':
                    codes = [f'{bf16_code(h):04x}' for h in a + b]
                else:
                    codes = [f'{fp16_code(f32(h)):04x}' for h in a + b]
                f.write(f'{int(c, 2):08x} {int(dd, 2):08x} ' + ' '.join(codes) + '\n')

if __name__ == '__main__':
    convert(sys.argv[1], sys.argv[2])
