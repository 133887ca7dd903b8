#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/NAME/), from files already in the
tree (the fixture candidates, the in-tree baseline, recorded tool reports, public reports recorded
on the H200) and small hand-made variants in each target's input layout (fuzz/README.md). Run from
the repository root: `python3 fuzz/make_seeds.py [BUILD_DIR]`; with BUILD_DIR the `receipt` seeds
are made too: a receipt signed by kloop's own code (BUILD_DIR/bin/store_fake_session_driver writes a
promoted session, BUILD_DIR/bin/store_cli signs it) and variants of it."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = 'fuzz/corpus'


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)


def read(path, mode='r'):
    with open(path, mode) as f:
        return f.read()


good_m = read('tests/evaluator/fixtures/good/manifest.json')
good_k = read('tests/evaluator/fixtures/good/kernel.cu')
base_m = read('kernels/rmsnorm/baseline/manifest.json')
base_k = read('kernels/rmsnorm/baseline/kernel.cu')

# manifest: MANIFEST \0 SOURCE
put('manifest', 'good', good_m + '\0' + good_k)
put('manifest', 'baseline', base_m + '\0' + base_k)
put('manifest', 'overflow', good_m.replace('256', '1e999', 1) + '\0' + good_k)
put('manifest', 'not_object', '[1,2,3]\0')
put('manifest', 'unknown_keys',
    '{"contract":"weighted_rmsnorm/1","extra":1,"launch":{"block_threads":-1}}\0'
    '__global__ void k(){}')
put('manifest', 'forbidden', read('tests/evaluator/fixtures/forbidden/manifest.json') + '\0' +
    read('tests/evaluator/fixtures/forbidden/printf.cu'))

# reply: a provider's HTTP body
reply = 'Here is the kernel.\n\n```cuda\n' + good_k + '\n```\n\n```json\n' + good_m + '\n```\n'


def openai(text, usage=None):
    return json.dumps({'id': 'x', 'object': 'chat.completion',
                       'choices': [{'index': 0, 'finish_reason': 'stop',
                                    'message': {'role': 'assistant', 'content': text}}],
                       'usage': usage or {'prompt_tokens': 100, 'completion_tokens': 50}})


put('reply', 'openai_good', openai(reply))
put('reply', 'openai_overflow_manifest', openai(reply.replace('"block_threads": 256',
                                                             '"block_threads": 1e999')))
put('reply', 'openai_usage_absurd', openai(reply, {'prompt_tokens': 1e30, 'completion_tokens': -5}))
put('reply', 'openai_usage_string', openai(reply, {'prompt_tokens': '100', 'completion_tokens': 5}))
put('reply', 'openai_no_content',
    json.dumps({'choices': [{'message': {'role': 'assistant'}, 'finish_reason': 'length'}]}))
put('reply', 'openai_error', json.dumps({'error': {'message': 'rate limited', 'type': 'x'}}))
put('reply', 'anthropic_good',
    json.dumps({'id': 'm', 'type': 'message', 'content': [{'type': 'text', 'text': reply}],
                'stop_reason': 'end_turn', 'usage': {'input_tokens': 10, 'output_tokens': 20}}))
put('reply', 'plain_reply_unclosed',
    'text\n```cuda\n__global__ void k(){}\n```\n```json\n{"a":1}\n')
put('reply', 'two_blocks', '```cu\nx\n```\n```cuda\ny\n```\n```JSON\n{}\n```\n')

# worker_result: RESULT_JSON \0 PROGRESS_JSON \0 exit-status byte (gpu_runner.h's protocol)
memory = {'peak_allocated_bytes': 1048576, 'allocations': 3, 'total_bytes': 150000000000,
          'used_before_bytes': 1, 'used_after_bytes': 2, 'min_free_bytes': 3,
          'peak_used_bytes': 4}
put('worker_result', 'pass',
    json.dumps({'status': 'pass', 'reason': '', 'device': {'name': 'NVIDIA H200'},
                'suite': {'passed': 48, 'failed': 0, 'cases': [{'name': 'c1', 'status': 'pass'}]},
                'fault': None, 'device_memory': memory}) +
    '\0{"index":3,"name":"w127","total":48}\0\x00')
put('worker_result', 'crashed',
    json.dumps({'status': 'crashed', 'reason': 'illegal address',
                'fault': {'class': 'illegal_address', 'case': 'c7'}}) +
    '\0{"index":7,"name":"c7","total":48}\0\x03')
put('worker_result', 'timeout', '\0{"index":1,"name":"big","total":2}\0\x41')


def samples(center, n, k):
    return [round(center * (1 + 0.01 * ((i * 7919 + k) % 13 - 6) / 6), 6) for i in range(n)]


def bench_shape(rows, h, dtype, cand, base):  # the layout of tests/perf/perf_gates_test.cpp
    return {'rows': rows, 'h': h, 'dtype': dtype, 'shape_class': 'streaming',
            'states': [{'state': 'cold', 'rounds': 40, 'stop': 'noise', 'input_sets': 1,
                        'samples': {'candidate_kernel': samples(cand, 40, 1),
                                    'baseline_kernel': samples(base, 40, 2),
                                    'aa_kernel': samples(base, 40, 3),
                                    'reference_kernel': samples(base * 3, 40, 4),
                                    'candidate_wrapper': samples(cand + 0.004, 40, 5)},
                        'batches': [{'first_round': 0, 'last_round': 7, 'throttled': True}],
                        'output_checks': [{'round': 3, 'pass': True}]}]}


put('worker_result', 'benchmark',
    json.dumps({'status': 'pass', 'protocol_sha256': 'ab',
                'benchmark': {'device': {'name': 'NVIDIA H200', 'l2_bytes': 62914560},
                              'copy_ceiling': {'bytes': 1073741824, 'time_ms': 0.51},
                              'shapes': [bench_shape(65536, 4096, 'bfloat16', 0.30, 0.36),
                                         bench_shape(1, 1009, 'float32', 0.004, 0.004)]},
                'pcsample': {'histogram': {'stall_long_scoreboard': 120, 'stall_wait': 4}}}) +
    '\0\0\x00')

# tool_output: a selector byte, then a tool's text (tests/perf/fixtures: recorded reports)
for f in ['memcheck_oob', 'racecheck_missing_barrier', 'initcheck_uninit_global',
          'synccheck_divergent', 'clean', 'unknown_kind', 'no_lineinfo']:
    put('tool_output', 'sanitizer_' + f, b'\x03' + read(f'tests/perf/fixtures/{f}.txt', 'rb'))
for f in ['ncu_dram_gbyte.csv', 'ncu_dram_small_units.csv', 'ncu_no_kernels.txt']:
    put('tool_output', f.split('.')[0], b'\x04' + read('tests/perf/fixtures/' + f, 'rb'))
put('tool_output', 'version', b'\x05' + read('tests/perf/fixtures/version.txt', 'rb'))
put('tool_output', 'nvrtc_log',
    b"\x00ptxas info    : Compiling entry function 'rms_f32' for 'sm_90'\n"
    b'ptxas info    : Used 32 registers, 380 bytes cmem[0]\n'
    b'kernel.cu(3): error: identifier "x" is undefined\n    x = 1;\n    ^\n')
put('tool_output', 'ptx', b'\x01.version 9.0\n.target sm_90\n.address_size 64\n'
    b'.visible .entry rms_f32(\n.param .u64 p0\n)\n.maxntid 256, 1, 1\n{\n'
    b'ld.global.nc.f32 %f1, [%rd1];\nret;\n}\n')
put('tool_output', 'sass', b'\x02        /*0000*/                   LDC R1, c[0x0][0x28] ;\n'
    b'        /*0010*/                   LDG.E.CONSTANT R2, desc[UR4][R2.64] ;\n'
    b'        /*0020*/                   EXIT ;\n')

# gate_evidence: REPORT_JSON \0 SOURCE (public reports recorded by the evaluator)
for f in ['report_build_fail', 'report_pass_bench', 'report_runtime_fail']:
    put('gate_evidence', f, read(f'tests/agent/fixtures/{f}.json') + '\0' + good_k)
put('gate_evidence', 'h200_flagship',
    read('tests/offline/fixtures/h200_flagship_report.json') + '\0' + base_k)

# cli_values: a selector byte, then the value
for i, v in enumerate(['1', '9223372036854775807', '010', '-5', 'nan', '1e999', '0x10', '3600',
                       '1.5', ' 2']):
    put('cli_values', f'value_{i}', b'\x00' + v.encode())
put('cli_values', 'argv', b'\x01optimize\0rmsnorm\0--json\0--\0--json')
put('cli_values', 'rollout', b'\x02' + json.dumps(
    {'feature_flag_and_scope': 'flag x', 'healthy_worker_recovery_and_reference_target': 'ref',
     'revalidation_policy': 'weekly'}).encode())
put('cli_values', 'rollout_bad', b'\x02{"feature_flag_and_scope":"","extra":1}')
put('cli_values', 'key_bad', b'\x03{"key_id":"k!","secret_key":"zz"}')


# store_rows: edits (column byte, rows byte, value \0), columns as fuzz/store_rows_target.cpp's
# kColumns; 36 = the blob's bytes
def edit(col, rows, value):
    return bytes([col, rows]) + (value if isinstance(value, bytes) else value.encode()) + b'\0'


put('store_rows', 'no_edit', b'')
put('store_rows', 'params_not_object', edit(0, 0, '[1,2]'))
put('store_rows', 'resources_string', edit(0, 0, '{"resources":{"kloop_peak_rss_kib":"many"}}'))
put('store_rows', 'unknown_codes', edit(1, 0, '7') + edit(15, 1, '99') + edit(29, 0, '42'))
put('store_rows', 'notes_cc', edit(6, 1, '{"checker_coverage":{"mutant_count":"x","per_operator":'
                                         '{"op":[1]},"gaps":[3,{"id":null}]},"usage_invalid":5}'))
put('store_rows', 'report_garbage', edit(9, 0, '{"gates":7}') +
    edit(14, 0, '{"summary":{"faster":1.5,"slower":"2"},"sandbox":4}'))
put('store_rows', 'telemetry', edit(18, 0, '{"arith_intensity":"x","achieved_gbps":null,'
                                           '"device_memory":[1]}'))
put('store_rows', 'holdout_result',
    edit(22, 0, '{"passed":-1,"failed":1e999,"commitment_verified":"yes"}'))
put('store_rows', 'invalid_utf8', edit(3, 0, b'\xff\xfe model') + edit(17, 0, b'\xc3('))
put('store_rows', 'blob_altered', edit(36, 0, 'altered bytes'))


# receipt: RECEIPT_JSON \0 REGISTRY_JSON, signed by the store's code
def receipt_seeds(build):
    with tempfile.TemporaryDirectory() as t:
        subprocess.run([f'{build}/bin/store_fake_session_driver', f'{t}/s', '2', '--finish'],
                       check=True, stdout=subprocess.DEVNULL)
        cli = f'{build}/bin/store_cli'
        subprocess.run([cli, 'keys', 'generate', '--out', f'{t}/key.json'], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([cli, 'receipt', 'sign', '1', '--key', f'{t}/key.json', '--reviewer',
                        'fuzz-seed', '--out', f'{t}/r.json', '--store', f'{t}/s'], check=True,
                       stdout=subprocess.DEVNULL)
        key = json.loads(read(f'{t}/key.json'))
        receipt = read(f'{t}/r.json')
    registry = json.dumps({key['key_id']: key['public_key']})
    put('receipt', 'signed', receipt + '\0' + registry)
    tampered = json.loads(receipt)
    tampered['payload']['reviewer'] = 'someone else'
    put('receipt', 'tampered', json.dumps(tampered) + '\0' + registry)
    put('receipt', 'unknown_key', receipt + '\0{}')
    put('receipt', 'not_object', '[1]\0[2]')


if len(sys.argv) > 1:
    receipt_seeds(sys.argv[1])
