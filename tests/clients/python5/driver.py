"""Drives the official RocketMQ 5.x Python client (PyPI `rocketmq-python-client`, gRPC)
for tests/tests/python5_client.rs.

Subcommands (every one takes --endpoints HOST:PORT of a broker's gRPC port, and
--ak/--sk for ACL-signed requests, --tls for TLS):
  produce      --topic T --count N --prefix P [--tag G] [--message-group MG]
               [--delay-ms D] [--key-prefix K]
               one send per message; prints "sent <index> <message id>"
  transaction  --topic T --count N --prefix P --end commit|rollback|none
               [--check commit|rollback]
               one transaction per message; with --end none the transactions stay open
               and the process answers the broker's check-backs with --check until it
               was asked about every message (prints "checked <body>"), then exits
  simple       --group G --topic T --want N --out FILE [--sql EXPR | --tag EXPR]
               [--invisible-secs S] [--mode ack|redeliver|change-invisible]
               a SimpleConsumer receiving until N distinct bodies were acked
  push         --group G --topic T --out FILE [--fail-first K]
               a PushConsumer whose listener fails each message's first K attempts;
               prints "started" and runs until its standard input closes

Consumers append "<body> <delivery attempt> <message id> <tag> <message group>" to FILE
and flush before they ack, so a line is on disk before the broker can forget the
message. Bodies are "<prefix>-<index:04>" (ASCII).
"""

import argparse
import sys
import threading
import time

from rocketmq import (ClientConfiguration, ConsumeResult, Credentials,
                      FilterExpression, Message, MessageListener, Producer,
                      PushConsumer, SimpleConsumer, TransactionChecker,
                      TransactionResolution)
from rocketmq.grpc_protocol import FilterType


def config(args):
    return ClientConfiguration(args.endpoints, Credentials(args.ak, args.sk),
                               request_timeout=10)


def body_of(prefix, index):
    return "%s-%04d" % (prefix, index)


def message(args, i):
    m = Message()
    m.topic = args.topic
    m.body = body_of(args.prefix, i).encode()
    if args.tag:
        m.tag = args.tag
    if args.key_prefix:
        m.keys = "%s-%d" % (args.key_prefix, i)
    if args.message_group:
        m.message_group = args.message_group
    if args.delay_ms:
        # This client takes the delivery time in whole seconds since the epoch: rounded
        # up, so the message is never due before the requested delay.
        m.delivery_timestamp = -(-(int(time.time() * 1000) + args.delay_ms) // 1000)
    m.add_property("index", str(i))
    return m


def produce(args):
    p = Producer(config(args), (args.topic,), tls_enable=args.tls)
    p.startup()
    try:
        for i in range(args.count):
            r = p.send(message(args, i))
            print("sent %d %s" % (i, r.message_id), flush=True)
    finally:
        p.shutdown()


class Checker(TransactionChecker):
    def __init__(self, answer):
        self.answer = answer
        self.checked = set()
        self.lock = threading.Lock()

    def check(self, msg):
        body = msg.body.decode()
        with self.lock:
            self.checked.add(body)
        print("checked %s" % body, flush=True)
        return self.answer


def transaction(args):
    answer = (TransactionResolution.COMMIT if args.check == "commit"
              else TransactionResolution.ROLLBACK)
    checker = Checker(answer)
    p = Producer(config(args), (args.topic,), checker, tls_enable=args.tls)
    p.startup()
    try:
        for i in range(args.count):
            t = p.begin_transaction()
            r = p.send(message(args, i), t)
            print("sent %d %s" % (i, r.message_id), flush=True)
            if args.end == "commit":
                t.commit()
            elif args.end == "rollback":
                t.rollback()
        if args.end == "none":
            deadline = time.time() + args.timeout_secs
            want = {body_of(args.prefix, i) for i in range(args.count)}
            while time.time() < deadline:
                with checker.lock:
                    if want <= checker.checked:
                        return
                time.sleep(0.1)
            sys.exit("not asked about %s" % sorted(want - checker.checked))
    finally:
        p.shutdown()


def subscription(args):
    if args.sql:
        return {args.topic: FilterExpression(args.sql, FilterType.SQL)}
    return {args.topic: FilterExpression(args.tag or "*")}


class Recorder:
    def __init__(self, path):
        self.file = open(path, "a", encoding="utf-8")
        self.lock = threading.Lock()

    def record(self, m):
        line = "%s %d %s %s %s\n" % (m.body.decode(), m.delivery_attempt or 0,
                                     m.message_id, m.tag or "-",
                                     m.message_group or "-")
        with self.lock:
            self.file.write(line)
            self.file.flush()


def simple(args):
    rec = Recorder(args.out)
    c = SimpleConsumer(config(args), args.group, subscription(args),
                       await_duration=args.await_secs, tls_enable=args.tls)
    c.startup()
    acked = set()
    deadline = time.time() + args.timeout_secs
    try:
        while len(acked) < args.want:
            if time.time() > deadline:
                sys.exit("acked %d of %d before the timeout" % (len(acked), args.want))
            try:
                got = c.receive(16, args.invisible_secs)
            except Exception as e:  # a slow answer under load: try again, as apps do
                print("receive failed: %r" % e, file=sys.stderr, flush=True)
                continue
            for m in got:
                rec.record(m)
                first = (m.delivery_attempt or 1) == 1
                if args.mode == "redeliver" and first:
                    continue  # left invisible: the broker must deliver it again
                if args.mode == "change-invisible" and first:
                    # A new handle with a short deadline; the message comes back soon.
                    c.change_invisible_duration(m, 1)
                    continue
                c.ack(m)
                acked.add(m.body.decode())
        print("acked %d" % len(acked), flush=True)
    finally:
        c.shutdown()


class Listener(MessageListener):
    def __init__(self, rec, fail_first):
        self.rec = rec
        self.fail_first = fail_first

    def consume(self, m):
        self.rec.record(m)
        if (m.delivery_attempt or 1) <= self.fail_first:
            return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS


def push(args):
    rec = Recorder(args.out)
    c = PushConsumer(config(args), args.group, Listener(rec, args.fail_first),
                     subscription(args), tls_enable=args.tls)
    c.startup()
    print("started", flush=True)
    try:
        sys.stdin.read()
    finally:
        c.shutdown()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=["produce", "transaction", "simple", "push"])
    ap.add_argument("--endpoints", required=True)
    ap.add_argument("--ak", default="")
    ap.add_argument("--sk", default="")
    ap.add_argument("--tls", action="store_true")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group")
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("--prefix", default="m")
    ap.add_argument("--tag")
    ap.add_argument("--key-prefix")
    ap.add_argument("--message-group")
    ap.add_argument("--delay-ms", type=int, default=0)
    ap.add_argument("--end", choices=["commit", "rollback", "none"], default="commit")
    ap.add_argument("--check", choices=["commit", "rollback"], default="commit")
    ap.add_argument("--sql")
    ap.add_argument("--want", type=int, default=1)
    ap.add_argument("--out")
    ap.add_argument("--invisible-secs", type=int, default=30)
    ap.add_argument("--await-secs", type=int, default=5)
    ap.add_argument("--mode", choices=["ack", "redeliver", "change-invisible"],
                    default="ack")
    ap.add_argument("--fail-first", type=int, default=0)
    ap.add_argument("--timeout-secs", type=int, default=90)
    args = ap.parse_args()
    {"produce": produce, "transaction": transaction, "simple": simple,
     "push": push}[args.command](args)


if __name__ == "__main__":
    main()
