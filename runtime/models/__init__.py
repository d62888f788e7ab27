"""The models runs talk to: the shared OpenAI client and the offline scripted model."""
