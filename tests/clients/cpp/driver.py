"""Drives the official RocketMQ C++ client (librocketmq, through the `rocketmq` PyPI
package's ctypes wrapper) for tests/tests/cpp_client.rs.

Subcommands:
  produce  --count N --size S --prefix P    one SEND_MESSAGE per message
  batch    --count N --size S --prefix P    one batch send of N messages
  consume  --group G --out FILE             push consumer; one line per delivery

Every message body is "<prefix>-<index:04>-" padded with 'x' to --size bytes (ASCII:
the wrapper reads bodies as C strings). The consumer appends
"<queueId> <queueOffset> <body>" to FILE and flushes before the listener returns, so a
line is on disk before the client can commit the offset past it. It prints "started"
once the consumer runs and stops when its standard input closes.
"""

import argparse
import os
import sys
import threading

from rocketmq.client import Message, Producer, PushConsumer


def body_of(prefix, index, size):
    head = "%s-%04d-" % (prefix, index)
    return head + "x" * max(0, size - len(head))


def producer(args):
    p = Producer(args.producer_group, timeout=10000)
    p.set_namesrv_addr(args.namesrv)
    p.start()
    return p


def message(args, i):
    m = Message(args.topic)
    m.set_tags("cpp")
    m.set_keys("%s-key-%d" % (args.prefix, i))
    m.set_body(body_of(args.prefix, i, args.size))
    return m


def produce(args):
    p = producer(args)
    try:
        for i in range(args.count):
            r = p.send_sync(message(args, i))
            print("sent %s %s" % (r.status.name, r.msg_id), flush=True)
    finally:
        p.shutdown()


def batch(args):
    p = producer(args)
    try:
        r = p.send_batch([message(args, i) for i in range(args.count)])
        print("sent %s %s" % (r.status.name, r.msg_id), flush=True)
    finally:
        p.shutdown()


def consume(args):
    out = open(args.out, "a", encoding="ascii")
    lock = threading.Lock()

    def on_message(msg):
        body = msg.body.decode("ascii", "replace")
        with lock:
            out.write("%d %d %s\n" % (msg.queue_id, msg.queue_offset, body))
            out.flush()
            os.fsync(out.fileno())
        # Returning normally acknowledges the message (CONSUME_SUCCESS).

    c = PushConsumer(args.group)
    c.set_namesrv_addr(args.namesrv)
    c.set_instance_name(args.instance)
    c.set_thread_count(2)
    c.subscribe(args.topic, on_message)
    c.start()
    print("started", flush=True)
    sys.stdin.read()
    c.shutdown()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=["produce", "batch", "consume"])
    ap.add_argument("--namesrv", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", default="cpp_consumer")
    ap.add_argument("--producer-group", default="cpp_producer")
    ap.add_argument("--instance", default="cpp-consumer-1")
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--prefix", default="m")
    ap.add_argument("--out")
    args = ap.parse_args()
    {"produce": produce, "batch": batch, "consume": consume}[args.command](args)


if __name__ == "__main__":
    main()
