"""The tester's OpenAI-compatible endpoint (SPEC §6.1): any tool that speaks the OpenAI Chat
Completions API tests the assistant through the tester listener, each request a conversation
of the tester's with every rule of the bus in force."""
