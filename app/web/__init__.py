"""Page routes: thin handlers that call the services and render templates."""
