"""The tutorial's consumer: join the group on connect, forward each group message."""

import json

from channels.generic.websocket import AsyncWebsocketConsumer

from bench.baseline.views import GROUP


class ChatConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        await self.channel_layer.group_add(GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(GROUP, self.channel_name)

    async def chat_message(self, event: dict[str, object]) -> None:
        await self.send(text_data=json.dumps({"id": event["id"], "body": event["body"]}))
