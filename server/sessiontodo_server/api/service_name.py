"""The service's full name, read from the generated descriptor: what auth and health route by,
kept apart from the servicer so that neither pulls the other in."""

from sessiontodo.v1 import todo_service_pb2

SERVICE_NAME: str = todo_service_pb2.DESCRIPTOR.services_by_name["TodoService"].full_name
