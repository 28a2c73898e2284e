"""firmware_bridge: the toy's MQTT protocol and its two ends.

- `protocol`  topic layout under `toy/<device_id>/` and the versioned payload models (v1)
- `config`    BridgeConfig and `parse_mqtt_url`
- `failures`  why a connection attempt failed, and whether retrying can help
- `inbox`     bounded inbound queues and the endpoint counters
- `ratelog`   LimitedLog: lines a hostile client can trigger, cut to a burst per minute and summed up
- `client`    BridgeClient, the runtime side (buttons/status/commands in; state/volume/results/presence out)
- `firmware`  FirmwareClient, the device side (used by `firmware-sim` and tests)
- `simulator` the `firmware-sim` console program

This package imports nothing from toy_runtime; paho-mqtt is imported only when a client is built.
"""

from .config import BridgeConfig, MqttUrl, parse_mqtt_url
from .endpoint import BridgeAuthError, BridgeError, BridgeUnreachable, ConnectionState, EndpointStats
from .protocol import PROTOCOL_VERSION, ProtocolError, Topics

__all__ = [
    "PROTOCOL_VERSION", "BridgeAuthError", "BridgeConfig", "BridgeError", "BridgeUnreachable", "ConnectionState",
    "EndpointStats", "MqttUrl", "ProtocolError", "Topics", "parse_mqtt_url",
]


def __getattr__(name: str):  # lazy: keep `import firmware_bridge` free of paho until a client is needed
    if name == "BridgeClient":
        from .client import BridgeClient

        return BridgeClient
    if name == "FirmwareClient":
        from .firmware import FirmwareClient

        return FirmwareClient
    raise AttributeError(name)
