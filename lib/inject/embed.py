#!/usr/bin/env python3
# Turn the agent's flat image (or its shared object: a third argument names
# the array) into a C array (no external tools needed).
import sys

data = open(sys.argv[1], 'rb').read()
name = sys.argv[3] if len(sys.argv) > 3 else 'pp_agent_image'
with open(sys.argv[2], 'w') as out:
    out.write('/* Generated from the agent image by embed.py. */\n#include <stddef.h>\n')
    out.write('const unsigned char %s[] __attribute__((aligned(64))) = {\n' % name)
    for i in range(0, len(data), 16):
        out.write('  ' + ', '.join('0x%02x' % b for b in data[i:i + 16]) + ',\n')
    out.write('};\nconst size_t %s_len = %d;\n' % (name, len(data)))
