"""The typical send: insert the row, then `group_send` its content to every socket."""

import json

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from bench.baseline.models import Row

GROUP = "chat"


@csrf_exempt
@require_POST
def send(request: HttpRequest) -> JsonResponse:
    body = json.loads(request.body)["body"]
    row = Row.objects.create(body=body)
    async_to_sync(get_channel_layer().group_send)(
        GROUP, {"type": "chat.message", "id": row.pk, "body": row.body}
    )
    return JsonResponse({"id": row.pk}, status=201)
