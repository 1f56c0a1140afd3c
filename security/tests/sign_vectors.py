#!/usr/bin/env python3
"""Independent RocketMQ 4.9 ACL 1.0 signer (AclUtils.combineRequestContent + AclSigner),
written from the algorithm's description with Python's hmac/hashlib/base64 only.

Prints JSON vectors: extFields (as sent, without Signature), body (hex), secret, and the
Signature. The Rust test checks that the broker-side verifier accepts each and refuses
tampered copies.
"""
import base64
import hashlib
import hmac
import json
import random


def sign(fields, body, secret):
    # Values only, sorted by key (Java String order = code-unit order; ASCII keys here),
    # Signature excluded, then the raw body.
    content = b"".join(fields[k].encode("utf-8") for k in sorted(fields) if k != "Signature")
    content += body
    mac = hmac.new(secret.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(mac).decode("ascii")


def main():
    rng = random.Random(20261201)
    vectors = []
    # The worked example of the reference notes.
    fields = {"AccessKey": "RocketMQ", "consumerGroup": "groupB", "topic": "topicB",
              "queueId": "0", "commitOffset": "100"}
    vectors.append({"code": 15, "fields": fields, "body": "", "secret": "12345678"})
    vectors.append({"code": 15, "fields": fields, "body": b'{"x":1}'.hex(), "secret": "12345678"})
    # SEND_MESSAGE_V2-like requests with random values, a security token, unicode, empties.
    alphabet = "abcXYZ019_-%|=: ,.\u00e9\u4e2d"
    for i in range(40):
        f = {"AccessKey": "producerAK%d" % i}
        for key in "abcdefghijklmn"[: rng.randint(3, 14)]:
            f[key] = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        if i % 3 == 0:
            f["SecurityToken"] = "tok-%d" % rng.randint(0, 10**9)
        body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300)))
        secret = "".join(rng.choice("ABCdef123!@#") for _ in range(rng.randint(7, 40)))
        vectors.append({"code": 310, "fields": f, "body": body.hex(), "secret": secret})
    for v in vectors:
        v["signature"] = sign(v["fields"], bytes.fromhex(v["body"]), v["secret"])
    print(json.dumps(vectors))


if __name__ == "__main__":
    main()
