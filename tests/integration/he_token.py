"""Signed-URL tokens as an issuer makes them, written from the formats'
descriptions (not from hlsedge's code), with Python's hmac and hashlib:

  edgeauth():    Akamai EdgeAuth 2.0: "[ip=IP~][st=START~]exp=END~acl=ACL
                 [!ACL...]~[id=ID~][data=DATA~]hmac=HEX", the HMAC-SHA256
                 keyed with the hex-decoded key over the fields before hmac
                 joined with '~' (plus "~url=PATH" for a URL token, which
                 is hashed but not sent)
  secure_link(): nginx secure_link_md5: MD5 over the template with
                 $expires, $uri, $remote_addr and $secret substituted,
                 base64url without padding
"""

import base64
import hashlib
import hmac
import re


def edgeauth(key_hex, exp, acl=None, url=None, ip=None, st=None, id=None, data=None):
    fields = []
    if ip is not None:
        fields.append("ip=%s" % ip)
    if st is not None:
        fields.append("st=%d" % st)
    fields.append("exp=%d" % exp)
    if acl is not None:
        fields.append("acl=%s" % ("!".join(acl) if isinstance(acl, (list, tuple)) else acl))
    if id is not None:
        fields.append("id=%s" % id)
    if data is not None:
        fields.append("data=%s" % data)
    source = list(fields)
    if url is not None:
        source.append("url=%s" % url)
    mac = hmac.new(bytes.fromhex(key_hex), "~".join(source).encode(), hashlib.sha256).hexdigest()
    return "~".join(fields + ["hmac=" + mac])


def secure_link(secret, uri, expires=None, ip="127.0.0.1", template="$expires$uri$remote_addr $secret"):
    values = {"expires": "" if expires is None else str(expires), "uri": uri, "remote_addr": ip,
              "secret": secret}
    text = re.sub(r"\$(expires|uri|remote_addr|secret)", lambda m: values[m.group(1)], template)
    return base64.urlsafe_b64encode(hashlib.md5(text.encode()).digest()).rstrip(b"=").decode()
