#!/usr/bin/env python3
"""Writes record batch test vectors with kafka-python's magic v2 batch builder, a third
implementation (a port of the Java client's), one file per codec: kafka-python-<codec>.bin.

Usage: python3 make_vectors.py OUT_DIR
Needs: pip install kafka-python==3.0.12 python-snappy==0.7.3 lz4 zstandard

Record i (0..25) is: timestamp 1_700_000_000_000 + 3*i; key b"key-<i>" unless i % 3 == 0
(null); value bytes([i % 251]) * (i * 37 % 300) unless i % 7 == 5 (null); one header
("h<i>", b"v<i>") when i is odd. Producer id 4242, epoch 7, base sequence 90.
records_kafka_python.rs rebuilds the same records to compare.
"""
import os
import sys

from kafka.record.default_records import DefaultRecordBatchBuilder

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def build(codec):
    b = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False,
        producer_id=4242, producer_epoch=7, base_sequence=90, batch_size=1 << 20)
    for i in range(25):
        key = None if i % 3 == 0 else b"key-%d" % i
        value = None if i % 7 == 5 else bytes([i % 251]) * (i * 37 % 300)
        headers = [("h%d" % i, b"v%d" % i)] if i % 2 else []
        b.append(i, 1_700_000_000_000 + 3 * i, key, value, headers)
    return bytes(b.build())


def main():
    out = sys.argv[1]
    for name, codec in CODECS.items():
        with open(os.path.join(out, "kafka-python-%s.bin" % name), "wb") as f:
            f.write(build(codec))


if __name__ == "__main__":
    main()
