#!/usr/bin/python3
"""Wrong kernels made from the model (`mlaref run`), standard library only.
  usage: wrong.py MODE MLAREF RECIPE INPUTS OUT
  scale: o times 1.0625 (a scale applied wrong), written as a folder OUT/o.npy (bf16 as '<u2')
  nan:   o with its first element NaN, as .safetensors
  shape: o of shape [1, 1, 512] F32 whatever the inputs, as .safetensors
"""
import json
import os
import struct
import subprocess
import sys


def read_st(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    head = json.loads(b[8:8 + n])
    return head, b[8 + n:]


def write_st(path, tensors):
    head, data = {}, b''
    for name, (dtype, shape, raw) in tensors.items():
        end = len(data) + len(raw)
        head[name] = {'dtype': dtype, 'shape': shape, 'data_offsets': [len(data), end]}
        data += raw
    h = json.dumps(head).encode()
    h += b' ' * (-len(h) % 8)
    open(path, 'wb').write(struct.pack('<Q', len(h)) + h + data)


def bf16(x):
    """binary32 to bf16 bits, round to nearest even"""
    u = struct.unpack('<I', struct.pack('<f', x))[0]
    return (u + 0x7fff + ((u >> 16) & 1)) >> 16 & 0xffff


def model_o(mlaref, recipe, inputs, out):
    subprocess.run([mlaref, 'run', '--recipe', recipe, '--inputs', inputs, '--out', out],
                   check=True, stdout=subprocess.DEVNULL)
    head, data = read_st(out)
    t = head['o']
    a, b = t['data_offsets']
    return t, data[a:b]


def main():
    mode, mlaref, recipe, inputs, out = sys.argv[1:6]
    t, raw = model_o(mlaref, recipe, inputs, out + '.model.safetensors')
    if mode == 'shape':
        write_st(out, {'o': ('F32', [1, 1, 512], bytes(4 * 512))})
    elif mode == 'nan':
        assert t['dtype'] == 'BF16'
        write_st(out, {'o': ('BF16', t['shape'], b'\xc0\x7f' + raw[2:])})
    elif mode == 'scale':
        assert t['dtype'] == 'BF16'
        codes = struct.unpack('<%dH' % (len(raw) // 2), raw)
        vals = [struct.unpack('<f', struct.pack('<I', c << 16))[0] * 1.0625 for c in codes]
        o = struct.pack('<%dH' % len(vals), *(bf16(v) for v in vals))
        os.makedirs(out)
        h = "{'descr': '<u2', 'fortran_order': False, 'shape': %s, }" % repr(tuple(t['shape']))
        h += ' ' * (63 - (10 + len(h)) % 64) + '\n'
        open(out + '/o.npy', 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h))
                                         + h.encode('latin1') + o)
    else:
        sys.exit('wrong.py: unknown mode ' + mode)


main()
