"""ChatAgent streaming: text-event and tool-call protocol parsers, speech splitting, the agents themselves."""
