"""What the server and the clients both build on, importing neither (nor gRPC): the command-line
standard of every pydantic-settings program (``command_line``), the signals that stop every
long-running one (``stop_signals``) and the loopback test of their public-address refusals
(``addresses``).

It sits below both stacks, as the generated protos do, so that the server never depends on a
client package and no client on the server; ``make lint`` holds it to that.
"""
